import jax
import jax.numpy as jnp

SIZES = {"full": (2048, 32000), "small": (64, 1280)}  # tokens, vocabulary


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    t, v = SIZES[size]
    kx, kl = jax.random.split(jax.random.key(seed))
    logits = (2.0 * jax.random.normal(kx, (t, v), jnp.float32)).astype(dtype)
    labels = jax.random.randint(kl, (t,), 0, v, dtype=jnp.int32)
    return (logits, labels), ()


def computation(logits, labels):
    lse = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0].astype(jnp.float32)
    return lse - picked
