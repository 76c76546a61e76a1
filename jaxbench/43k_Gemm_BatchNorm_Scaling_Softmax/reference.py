"""43k_Gemm_BatchNorm_Scaling_Softmax: softmax(scale * BN_train(x @ W + b)) over features.

KernelBench level 2 problem 84. BatchNorm1d runs in training mode (the module's default):
batch statistics over the B rows, biased variance, eps 1e-5; the running-stat update is a
side effect with no output and is not modelled.
"""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 384)}  # batch, in_features, out_features
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb, kg, kbb, ks = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    bn_w = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    bn_b = (0.1 * jax.random.normal(kbb, (n,), jnp.float32)).astype(dtype)
    scale = (1.0 + 0.1 * jax.random.normal(ks, (1,), jnp.float32)).astype(dtype)  # nn.Parameter, shape (1,)
    return (x, w, lin_b, bn_w, bn_b, scale), (EPS,)


def computation(x, w, lin_b, bn_w, bn_b, scale, eps):
    y = x @ w + lin_b                                  # [B, N]
    mean = jnp.mean(y, axis=0)                         # batch statistics (training mode)
    var = jnp.var(y, axis=0)
    y = (y - mean) * jax.lax.rsqrt(var + eps) * bn_w + bn_b
    return jax.nn.softmax(scale * y, axis=1)


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
