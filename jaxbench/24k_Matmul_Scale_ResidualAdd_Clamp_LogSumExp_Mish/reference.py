"""24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish: y = lse(clip(4 (x @ W.T + b), -10, 10)), then y * mish(y)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, input_size, hidden_size


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(kb, (n,), dtype)  # JAXBench: zeros
    return (x, w, bias), ()


def computation(x, w, bias):
    y = (jnp.matmul(x, w.T) + bias) * 2.0
    y = jnp.clip(y + y, -10.0, 10.0)  # the residual add of the scaled value to itself
    y = jax.scipy.special.logsumexp(y, axis=1, keepdims=True)
    return y * (y * jnp.tanh(jnp.logaddexp(y, 0.0)))  # y times mish(y)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
