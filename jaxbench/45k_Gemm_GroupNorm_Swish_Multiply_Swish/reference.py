"""45k_Gemm_GroupNorm_Swish_Multiply_Swish: swish(swish(GroupNorm(x @ W.T + b)) * w) (KernelBench level 2 problem 88)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
GROUP_SIZE = 32  # 256 groups of the 8192 features at full size
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w = (jax.random.normal(keys[1], (n, k), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[2], (n,), dtype)  # JAXBench: zeros
    gn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (n,), dtype)  # JAXBench: ones
    gn_bias = 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    multiply_weight = jax.random.normal(keys[5], (n,), dtype)  # JAXBench: zeros
    return (x, w, bias, gn_weight, gn_bias, multiply_weight), ()


def computation(x, w, bias, gn_weight, gn_bias, multiply_weight):
    h = jnp.matmul(x, w.T) + bias
    b, c = h.shape
    g = h.reshape(b, c // GROUP_SIZE, GROUP_SIZE)
    g = (g - jnp.mean(g, axis=-1, keepdims=True)) / jnp.sqrt(jnp.var(g, axis=-1, keepdims=True) + EPS)
    h = g.reshape(b, c) * gn_weight + gn_bias
    h = h * jax.nn.sigmoid(h) * multiply_weight
    return h * jax.nn.sigmoid(h)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
