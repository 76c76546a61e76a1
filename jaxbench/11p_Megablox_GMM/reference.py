"""11p_Megablox_GMM: grouped matmul out[i] = lhs[i] @ rhs[group(i)], rows of lhs sorted by group (Qwen3-235B MoE)."""
import jax
import jax.numpy as jnp

# rows M (tokens x top-k), K (embed), N (expert mlp), G (experts), the largest group (a static argument)
SIZES = {"full": (4096 * 8, 4096, 1536, 128, 256), "small": (1024, 256, 256, 16, 128)}
PUBLISHED_SEED = 42  # the full-size inputs at this seed are JAXBench's: every group M / G rows


def get_inputs(dtype=jnp.bfloat16, size="full", seed=PUBLISHED_SEED):
    m, k, n, g, max_group = SIZES[size]
    kl, kr, kg = jax.random.split(jax.random.key(seed), 3)
    if size == "full" and seed == PUBLISHED_SEED:
        limit = 1 / (m * k)  # JAXBench's scale for both operands (outputs near 1e-13: too small to check)
        lhs = jax.random.uniform(kl, (m, k), dtype, minval=-limit, maxval=limit)
        rhs = jax.random.uniform(kr, (g, k, n), dtype, minval=-limit, maxval=limit)
        group_sizes = jnp.full((g,), m // g, jnp.int32)
    else:  # the check sets: unit-scale values and uneven groups
        lhs = jax.random.normal(kl, (m, k), dtype)
        rhs = (jax.random.normal(kr, (g, k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
        group_sizes = _uneven_groups(kg, m, g, max_group)
    return (lhs, rhs, group_sizes), (max_group,)


def _uneven_groups(key, m: int, g: int, max_group: int):
    """Group sizes in [0, max_group] summing to m, some empty; the last group is full, so the reference's
    fixed-size window at each group's start never runs past the last row."""
    rest = m - max_group
    weights = jax.random.uniform(key, (g - 1,)) * (jax.random.uniform(jax.random.fold_in(key, 1), (g - 1,)) > 0.2)
    sizes = jnp.minimum(jnp.floor(weights / weights.sum() * rest), max_group).astype(jnp.int32)
    sizes = sizes.at[jnp.argmin(sizes)].add(rest - sizes.sum())  # exact total (the least loaded absorbs it)
    return jnp.concatenate([jnp.clip(sizes, 0, max_group), jnp.array([max_group], jnp.int32)])


def computation(lhs, rhs, group_sizes, max_group):
    m, k = lhs.shape
    g, _, n = rhs.shape
    starts = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(group_sizes)[:-1]])
    rows = jax.lax.broadcasted_iota(jnp.int32, (max_group, n), 0)

    def one_group(out, i):  # a fixed max_group-row window at the group's start, rows past its size masked
        window = jax.lax.dynamic_slice(lhs, (starts[i], 0), (max_group, k))
        product = jnp.where(rows < group_sizes[i], jnp.dot(window, rhs[i], preferred_element_type=jnp.float32), 0.0)
        current = jax.lax.dynamic_slice(out, (starts[i], 0), (max_group, n))
        return jax.lax.dynamic_update_slice(out, current + product.astype(out.dtype), (starts[i], 0)), None

    out, _ = jax.lax.scan(one_group, jnp.zeros((m + max_group, n), lhs.dtype), jnp.arange(g))
    return out[:m]


def get_flops():
    m, k, n, _, _ = SIZES["full"]
    return 2 * m * k * n
