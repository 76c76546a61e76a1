"""10p_Sparse_MoE: Mixtral-8x7B mixture of experts, top-2 routing, every expert computed densely as in JAXBench."""
import jax
import jax.numpy as jnp

SIZES = {"full": (2, 4096, 4096, 14336, 8), "small": (1, 128, 256, 512, 8)}  # batch, seq, embed, mlp, experts
TOP_K = 2


def get_inputs(dtype=jnp.bfloat16, size="full", seed=42):
    b, s, e, m, n = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(keys[0], (b, s, e), dtype)
    router = jax.random.normal(keys[1], (e, n), dtype) * 0.02
    gate = jax.random.normal(keys[2], (n, e, m), dtype) * 0.02
    up = jax.random.normal(keys[3], (n, e, m), dtype) * 0.02
    down = jax.random.normal(keys[4], (n, m, e), dtype) * 0.02
    return (x, router, gate, up, down), ()


def computation(x, router, gate, up, down):
    n = router.shape[-1]
    top_logits, top_experts = jax.lax.top_k(jnp.dot(x, router), TOP_K)
    top_probs = jax.nn.softmax(top_logits, axis=-1)
    hidden = jax.nn.silu(jnp.einsum("bse,nem->bsnm", x, gate)) * jnp.einsum("bse,nem->bsnm", x, up)
    expert_out = jnp.einsum("bsnm,nme->bsne", hidden, down)  # every token through every expert
    weights = (jax.nn.one_hot(top_experts, n) * top_probs[..., None]).sum(axis=2)  # float32, zero off the top 2
    return jnp.einsum("bsne,bsn->bse", expert_out, weights)


def get_flops():
    b, s, e, m, n = SIZES["full"]
    return 2 * b * s * e * n + b * s * TOP_K * 3 * 2 * e * m  # routing + the top-2 experts' MLPs (JAXBench's count)
