"""40k_Gemm_GroupNorm_Min_BiasAdd: the row min of GroupNorm(x @ W.T + b), broadcast against a [1, C, 1, 1] bias."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
GROUP_SIZE = 16  # 512 groups of the 8192 features at full size
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w = (jax.random.normal(keys[1], (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    linear_bias = jax.random.normal(keys[2], (n,), dtype)  # JAXBench: zeros
    gn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (n,), dtype)  # JAXBench: ones
    gn_bias = 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[5], (1, n, 1, 1), dtype)  # JAXBench: zeros
    return (x, w, linear_bias, gn_weight, gn_bias, bias), ()


def computation(x, w, linear_bias, gn_weight, gn_bias, bias):
    h = jnp.matmul(x, w.T) + linear_bias
    b, c = h.shape
    g = h.reshape(b, c // GROUP_SIZE, GROUP_SIZE)
    g = (g - jnp.mean(g, axis=2, keepdims=True)) / jnp.sqrt(jnp.var(g, axis=2, keepdims=True) + EPS)
    low = jnp.min(g.reshape(b, c) * gn_weight + gn_bias, axis=1, keepdims=True)  # [B, 1]
    return low.reshape(1, 1, b, 1) + bias  # broadcast to [1, C, B, 1], as the PyTorch module does


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
