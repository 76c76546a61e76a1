"""48k_Matmul_BatchNorm_BiasAdd_Divide_Swish: swish((BatchNorm_eval(x @ W + b) + bias) / 1.0) (KernelBench level 2 problem 97)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5
DIVIDE_VALUE = 1.0


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 8)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w = (jax.random.normal(keys[1], (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)  # JAXBench: zeros
    linear_bias = jax.random.normal(keys[2], (n,), dtype)  # JAXBench: zeros
    bn_scale = 1.0 + 0.1 * jax.random.normal(keys[3], (n,), dtype)  # JAXBench: ones
    bn_bias = 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    bn_mean = 0.1 * jax.random.normal(keys[5], (n,), dtype)  # JAXBench: zeros
    bn_var = jax.random.uniform(keys[6], (n,), dtype, 0.5, 1.5)  # JAXBench: ones
    bias = jax.random.normal(keys[7], (1,), dtype)  # JAXBench: zeros
    return (x, w, linear_bias, bn_scale, bn_bias, bn_mean, bn_var, bias), ()


def computation(x, w, linear_bias, bn_scale, bn_bias, bn_mean, bn_var, bias):
    h = jnp.matmul(x, w) + linear_bias
    h = bn_scale * ((h - bn_mean) / jnp.sqrt(bn_var + EPS)) + bn_bias  # running statistics: inference
    h = (h + bias) / DIVIDE_VALUE
    return h * jax.nn.sigmoid(h)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
