"""26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply: InstanceNorm of a Linear's output seen as [B, C, 1, 1], + y, * y."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    y = jax.random.uniform(keys[1], (b, n), dtype)
    w = (jax.random.normal(keys[2], (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[3], (n,), dtype)  # JAXBench: zeros
    in_weight = 1.0 + 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: ones
    in_bias = jax.random.normal(keys[5], (n,), dtype)  # JAXBench: zeros
    return (x, y, w, bias, in_weight, in_bias), ()


def computation(x, y, w, bias, in_weight, in_bias):
    h = (x @ w.T + bias)[:, :, None, None]  # [B, C, 1, 1]: each instance is one value
    mean = jnp.mean(h, axis=(2, 3), keepdims=True)
    var = jnp.var(h, axis=(2, 3), keepdims=True)
    h = (h - mean) / jnp.sqrt(var + EPS) * in_weight[None, :, None, None] + in_bias[None, :, None, None]
    return (h[:, :, 0, 0] + y) * y


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
