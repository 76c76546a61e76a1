import jax
import jax.numpy as jnp

# rows (tokens x top-k, sorted by expert), embed, expert hidden, experts
SIZES = {"full": (4096, 1024, 2048, 8), "small": (256, 128, 256, 4)}


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    m, d, h, g = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(keys[0], (m, d), dtype)
    w_gate, w_up = ((jax.random.normal(k, (g, d, h), jnp.float32) / d ** 0.5).astype(dtype) for k in keys[1:3])
    w_down = (jax.random.normal(keys[3], (g, h, d), jnp.float32) / h ** 0.5).astype(dtype)
    cuts = jnp.sort(jax.random.randint(keys[4], (g - 1,), 0, m + 1))  # uneven groups summing to m
    sizes = jnp.diff(jnp.concatenate([jnp.zeros(1, jnp.int32), cuts, jnp.full((1,), m, jnp.int32)]))
    sizes = sizes.at[1].set(0).at[0].add(sizes[1]).astype(jnp.int32)  # the second expert gets no token
    return (x, w_gate, w_up, w_down, sizes), ()


def computation(x, w_gate, w_up, w_down, sizes):
    gate = jax.lax.ragged_dot(x, w_gate, sizes, preferred_element_type=jnp.float32)
    up = jax.lax.ragged_dot(x, w_up, sizes, preferred_element_type=jnp.float32)
    hidden = (jax.nn.silu(gate) * up).astype(x.dtype)
    return jax.lax.ragged_dot(hidden, w_down, sizes)
