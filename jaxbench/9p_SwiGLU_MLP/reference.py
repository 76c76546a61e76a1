"""9p_SwiGLU_MLP: Llama-style gated MLP, down(silu(x @ W_gate) * (x @ W_up)), bf16 in/out."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 8192, 28672), "small": (256, 512, 768)}  # tokens, embed, hidden


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    t, d, h = SIZES[size]
    kx, kg, ku, kd = jax.random.split(jax.random.key(seed), 4)
    x = jax.random.normal(kx, (t, d), dtype)
    w_gate = (jax.random.normal(kg, (d, h), jnp.float32) / jnp.sqrt(d)).astype(dtype)
    w_up = (jax.random.normal(ku, (d, h), jnp.float32) / jnp.sqrt(d)).astype(dtype)
    w_down = (jax.random.normal(kd, (h, d), jnp.float32) / jnp.sqrt(h)).astype(dtype)
    return (x, w_gate, w_up, w_down), ()


def computation(x, w_gate, w_up, w_down):
    gate = jnp.dot(x, w_gate, preferred_element_type=jnp.float32)
    up = jnp.dot(x, w_up, preferred_element_type=jnp.float32)
    h = (jax.nn.silu(gate) * up).astype(x.dtype)  # the activation is bf16 before the down projection
    return jnp.dot(h, w_down, preferred_element_type=jnp.float32).astype(x.dtype)


def get_flops():
    t, d, h = SIZES["full"]
    return 3 * 2 * t * d * h  # gate, up and down projections
