"""10p_Sparse_MoE: Mixtral-style sparse MoE layer (top-2 of 8 SwiGLU experts), computed densely."""
import jax
import jax.numpy as jnp

SIZES = {"full": (8192, 4096, 14336, 8), "small": (256, 256, 512, 8)}  # tokens, embed, hidden, experts
TOP_K = 2


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    t, d, h, e = SIZES[size]
    kx, kr, kg, ku, kd = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(kx, (t, d), dtype)
    w_router = (jax.random.normal(kr, (d, e), jnp.float32) / jnp.sqrt(d)).astype(dtype)
    w_gate = (jax.random.normal(kg, (e, d, h), jnp.float32) / jnp.sqrt(d)).astype(dtype)
    w_up = (jax.random.normal(ku, (e, d, h), jnp.float32) / jnp.sqrt(d)).astype(dtype)
    w_down = (jax.random.normal(kd, (e, h, d), jnp.float32) / jnp.sqrt(h)).astype(dtype)
    return (x, w_router, w_gate, w_up, w_down), ()


def computation(x, w_router, w_gate, w_up, w_down):
    n_experts = w_router.shape[1]
    logits = jnp.dot(x, w_router, preferred_element_type=jnp.float32)  # [T, E], float32
    top_logits, top_idx = jax.lax.top_k(logits, TOP_K)
    top_w = jax.nn.softmax(top_logits, axis=-1)  # softmax over the chosen two
    # combine[t, e]: the routing weight of expert e for token t (0 where e is not chosen)
    combine = jnp.sum(jax.nn.one_hot(top_idx, n_experts, dtype=jnp.float32) * top_w[..., None], axis=1)

    def expert(acc, params):
        wg, wu, wd, c = params
        gate = jnp.dot(x, wg, preferred_element_type=jnp.float32)
        up = jnp.dot(x, wu, preferred_element_type=jnp.float32)
        hid = (jax.nn.silu(gate) * up).astype(x.dtype)
        y = jnp.dot(hid, wd, preferred_element_type=jnp.float32)
        return acc + c[:, None] * y, None

    # Dense: every expert runs on every token and is weighted by combine (zero when not routed).
    # A scan over experts keeps one expert's [T, hidden] activations live at a time.
    init = jnp.zeros((x.shape[0], w_down.shape[2]), jnp.float32)
    out, _ = jax.lax.scan(expert, init, (w_gate, w_up, w_down, combine.T))
    return out.astype(x.dtype)


def get_flops():
    t, d, h, e = SIZES["full"]
    # Useful work only: each token goes through TOP_K experts (3 matmuls each), plus the router.
    return TOP_K * 3 * 2 * t * d * h + 2 * t * d * e
