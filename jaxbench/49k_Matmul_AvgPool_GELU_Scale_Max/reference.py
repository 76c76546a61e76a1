"""49k_Matmul_AvgPool_GELU_Scale_Max (KernelBench level 2 problem 98).

max_j scale * gelu(avgpool16(x @ W + b))[:, j]: AvgPool1d(kernel 16, stride 16) over the
features, exact GELU, times 2.0, max over the pooled features; output [B].
"""
import jax
import jax.numpy as jnp

SIZES = {"full": (4096, 8192, 8192), "small": (256, 512, 512)}  # batch, in_features, out_features
POOL_KERNEL_SIZE = 16
SCALE_FACTOR = 2.0


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, k, n = SIZES[size]
    kx, kw, kb = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (b, k), dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    lin_b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    return (x, w, lin_b), (POOL_KERNEL_SIZE, SCALE_FACTOR)


def computation(x, w, lin_b, pool_kernel_size, scale_factor):
    y = x @ w + lin_b                                            # [B, N]
    b, n = y.shape
    y = jnp.mean(y.reshape(b, n // pool_kernel_size, pool_kernel_size), axis=-1)  # AvgPool1d
    y = jax.nn.gelu(y, approximate=False) * scale_factor
    return jnp.max(y, axis=1)                                    # [B]


def get_flops():
    # The GEMM as the operator states it. Pooling commutes with the Linear, so a kernel may
    # instead multiply by W averaged over each window (N / 16 columns): 1/16 of these FLOPs.
    b, k, n = SIZES["full"]
    return 2 * b * k * n
