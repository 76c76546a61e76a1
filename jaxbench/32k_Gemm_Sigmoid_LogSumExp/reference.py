"""32k_Gemm_Sigmoid_LogSumExp: logsumexp(sigmoid(x @ W1.T + b1) @ W2.T + b2, axis=1) (KernelBench level 2 problem 45)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (16384, 2048, 4096, 1024), "small": (256, 512, 384, 256)}  # batch, input, hidden, output


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, h, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w1 = (jax.random.normal(keys[1], (h, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    b1 = jax.random.normal(keys[2], (h,), dtype)  # JAXBench: zeros
    w2 = (jax.random.normal(keys[3], (n, h), jnp.float32) / jnp.sqrt(h)).astype(dtype)  # JAXBench: zeros
    b2 = jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    return (x, w1, b1, w2, b2), ()


def computation(x, w1, b1, w2, b2):
    hidden = jax.nn.sigmoid(jnp.matmul(x, w1.T) + b1)
    return jax.scipy.special.logsumexp(jnp.matmul(hidden, w2.T) + b2, axis=1)


def get_flops():
    b, k, h, n = SIZES["full"]
    return 2 * b * k * h + 2 * b * h * n
