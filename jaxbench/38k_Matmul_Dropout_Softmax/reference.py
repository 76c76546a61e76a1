"""38k_Matmul_Dropout_Softmax: softmax(x @ W.T + bias, axis=1); dropout is the identity (inference) (KernelBench level 2 problem 66_Matmul_Dropout_Softmax, JAXBench sizes)."""
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
    return jax.nn.softmax(x @ w.T + bias, axis=1)  # nn.Dropout(0.2) is the identity at inference


def get_flops():
    b, k, n = SIZES["full"]
    return 2 * b * k * n
