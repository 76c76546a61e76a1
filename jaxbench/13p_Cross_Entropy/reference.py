"""13p_Cross_Entropy: mean cross-entropy of the LM head's logits, hidden @ W then log-softmax over the vocabulary."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 4096, 128256), "small": (256, 512, 3840)}  # tokens, hidden, vocabulary


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    t, h, v = SIZES[size]
    kh, kw, kl = jax.random.split(jax.random.key(seed), 3)
    hidden = jax.random.normal(kh, (t, h), dtype)
    weight = jax.random.normal(kw, (h, v), dtype) * 0.02
    labels = jax.random.randint(kl, (t,), 0, v, jnp.int32)
    return (hidden, weight, labels), ()


def computation(hidden, weight, labels):
    log_probs = jax.nn.log_softmax(jnp.dot(hidden, weight), axis=-1)  # bfloat16, as the logits are
    picked = jnp.sum(jax.nn.one_hot(labels, weight.shape[1]) * log_probs, axis=-1)  # float32 one-hot
    return -jnp.mean(picked)


def get_flops():
    t, h, v = SIZES["full"]
    return 2 * t * h * v + 3 * t * v  # the matmul, the softmax and the loss (JAXBench's count)
