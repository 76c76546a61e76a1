"""48k_Matmul_BatchNorm_BiasAdd_Divide_Swish (KernelBench level 2 problem 97).

swish((BN_train(x @ W + b) + bias) / divide_value). BatchNorm1d in training mode (the
module's default): batch statistics over the B rows, biased variance, eps 1e-5; the
running-stat update is a side effect with no output and is not modelled.
"""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5
DIVIDE_VALUE = 1.0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb, kg, kbb, kbias = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    bn_w = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    bn_b = (0.1 * jax.random.normal(kbb, (n,), jnp.float32)).astype(dtype)
    bias = jax.random.normal(kbias, (1,), dtype)  # nn.Parameter(torch.randn((1,)))
    return (x, w, lin_b, bn_w, bn_b, bias), (EPS, DIVIDE_VALUE)


def computation(x, w, lin_b, bn_w, bn_b, bias, eps, divide_value):
    y = x @ w + lin_b                                  # [B, N]
    mean = jnp.mean(y, axis=0)                         # batch statistics (training mode)
    var = jnp.var(y, axis=0)
    y = (y - mean) * jax.lax.rsqrt(var + eps) * bn_w + bn_b
    y = (y + bias) / divide_value
    return y * jax.nn.sigmoid(y)                       # Swish


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
