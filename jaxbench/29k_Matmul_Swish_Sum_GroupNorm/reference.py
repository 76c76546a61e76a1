"""29k_Matmul_Swish_Sum_GroupNorm: GroupNorm(swish(x @ W) + bias) over 64 groups (KernelBench level 2 problem 37)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 4096, 4096), "small": (256, 512, 512)}  # batch, in_features, out_features
GROUP_SIZE = 64  # 64 groups of the 4096 features at full size
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w = (jax.random.normal(keys[1], (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[2], (n,), dtype)  # JAXBench: zeros
    gn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (n,), dtype)  # JAXBench: ones
    gn_bias = 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    return (x, w, bias, gn_weight, gn_bias), ()


def computation(x, w, bias, gn_weight, gn_bias):
    h = jnp.matmul(x, w)
    h = jax.nn.sigmoid(h) * h + bias
    g = h.reshape(h.shape[0], -1, GROUP_SIZE)
    g = (g - jnp.mean(g, axis=-1, keepdims=True)) / jnp.sqrt(jnp.var(g, axis=-1, keepdims=True) + EPS)
    return g.reshape(h.shape) * gn_weight + gn_bias


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
