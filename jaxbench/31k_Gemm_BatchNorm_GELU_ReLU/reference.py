"""31k_Gemm_BatchNorm_GELU_ReLU: relu(gelu(BatchNorm_train(x @ W.T + b))) (KernelBench level 2 problem 41)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (16384, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    b, k, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (b, k), dtype)
    w = jax.random.normal(keys[1], (n, k), dtype)
    bias = jax.random.normal(keys[2], (n,), dtype)
    bn_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (n,), dtype)  # JAXBench: ones
    bn_bias = 0.1 * jax.random.normal(keys[4], (n,), dtype)  # JAXBench: zeros
    return (x, w, bias, bn_weight, bn_bias), ()


def computation(x, w, bias, bn_weight, bn_bias):
    h = jnp.matmul(x, w.T) + bias
    mean = jnp.mean(h, axis=0, keepdims=True)  # training-mode BatchNorm: statistics over the batch
    var = jnp.mean((h - mean) ** 2, axis=0, keepdims=True)
    h = (h - mean) / jnp.sqrt(var + EPS) * bn_weight + bn_bias
    return jax.nn.relu(jax.nn.gelu(h))


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
