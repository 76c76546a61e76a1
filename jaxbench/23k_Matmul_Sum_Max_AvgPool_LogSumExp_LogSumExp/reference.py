"""23k_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: a row sum of x @ W.T + bias, then four reductions over a size-1 axis."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(kb, (n,), dtype)  # JAXBench: zeros
    return (x, w, bias), ()


def computation(x, w, bias):
    y = jnp.sum(jnp.matmul(x, w.T) + bias, axis=1, keepdims=True)
    y = jnp.mean(jnp.max(y, axis=1, keepdims=True), axis=1, keepdims=True)
    y = jax.scipy.special.logsumexp(y, axis=1, keepdims=True)
    return jax.scipy.special.logsumexp(y, axis=1, keepdims=True)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
