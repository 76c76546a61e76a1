"""17p_Triangle_Multiplication: AlphaFold2's outgoing triangle multiplicative update on a pair representation."""
import jax
import jax.numpy as jnp

SIZES = {"full": (1536, 128), "small": (128, 128)}  # residues N, channels C
EPS = 1e-6


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    n, c = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 8)
    pair = jax.random.normal(keys[0], (n, n, c), dtype)
    mask = jnp.ones((n, n, 1), dtype)
    weights = [jax.random.normal(keys[i], (c, c), dtype) * 0.02 for i in (1, 2, 3, 4)]
    center_scale = jax.random.normal(keys[5], (c,), dtype) * 0.1 + 1.0
    out_proj = jax.random.normal(keys[6], (c, c), dtype) * 0.02
    out_gate = jax.random.normal(keys[7], (c, c), dtype) * 0.02
    return (pair, mask, *weights, center_scale, out_proj, out_gate), ()


def computation(pair, mask, left_proj, right_proj, left_gate, right_gate, center_scale, out_proj, out_gate):
    act = pair * mask
    left = jnp.dot(act, left_proj) * jax.nn.sigmoid(jnp.dot(act, left_gate))
    right = jnp.dot(act, right_proj) * jax.nn.sigmoid(jnp.dot(act, right_gate))
    update = jnp.einsum("ikc,jkc->ijc", left, right)  # the triangle: edges i-k and j-k give i-j
    update = update / jnp.sqrt(jnp.mean(update * update, axis=-1, keepdims=True) + EPS) * center_scale
    return jnp.dot(update, out_proj) * jax.nn.sigmoid(jnp.dot(pair, out_gate))


def get_flops():
    n, c = SIZES["full"]
    return 4 * 2 * n * n * c * c + 2 * n * n * n * c + 2 * 2 * n * n * c * c  # projections, triangle, output
