"""13p_Cross_Entropy: per-token cross-entropy logsumexp(logits) - logits[label], float32 inside."""
import jax
import jax.numpy as jnp

# The vocabulary keeps its shape at small size: 128256 = 501 * 256 and 3840 = 15 * 256 are
# multiples of 128 and 256 but not of 512.
SIZES = {"full": (8192, 128256), "small": (256, 3840)}  # tokens, vocab


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    t, v = SIZES[size]
    kx, kl = jax.random.split(jax.random.key(seed))
    logits = (2.0 * jax.random.normal(kx, (t, v), jnp.float32)).astype(dtype)
    labels = jax.random.randint(kl, (t,), 0, v, dtype=jnp.int32)
    return (logits, labels), ()


def computation(logits, labels):
    x = logits.astype(jnp.float32)
    lse = jax.nn.logsumexp(x, axis=-1)
    label_logit = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0].astype(jnp.float32)
    return lse - label_logit  # per-token losses, float32 [tokens]; the mean loss is their average


def get_flops():
    t, v = SIZES["full"]
    return 4 * t * v  # max, subtract, exp, sum per logit
