"""9p_SwiGLU_MLP: (silu(x @ gate) * (x @ up)) @ down, bfloat16 (Llama-3.1-70B MLP)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (2, 4096, 8192, 28672), "small": (1, 256, 512, 768)}  # batch, seq, embed, mlp


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, s, e, m = SIZES[size]
    kx, kg, ku, kd = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (b, s, e), dtype)
    gate = jax.random.normal(kg, (e, m), dtype) * 0.02
    up = jax.random.normal(ku, (e, m), dtype) * 0.02
    down = jax.random.normal(kd, (m, e), dtype) * 0.02
    return (x, gate, up, down), ()


def computation(x, gate, up, down):
    return jnp.dot(jax.nn.silu(jnp.dot(x, gate)) * jnp.dot(x, up), down)


def get_flops():
    b, s, e, m = SIZES["full"]
    return 3 * 2 * b * s * e * m
