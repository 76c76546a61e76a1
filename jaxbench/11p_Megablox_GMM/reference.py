"""11p_Megablox_GMM: grouped matmul out[i] = lhs[i] @ rhs[group(i)], rows of lhs sorted by group."""
import jax
import jax.numpy as jnp

# M = tokens * top_k rows (8192 tokens x top-8), K = embed, N = expert hidden, G = experts
SIZES = {"full": (65536, 4096, 1536, 128), "small": (1024, 256, 256, 16)}  # M, K, N, G
TILE = 128  # rows per tile in the reference's padded layout


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    m, k, n, g = SIZES[size]
    kl, kr, kw, ki, ke = jax.random.split(jax.random.key(seed), 5)
    lhs = jax.random.normal(kl, (m, k), dtype)
    rhs = (jax.random.normal(kr, (g, k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    # Uneven expert loads: each row picks an expert from a random skewed distribution, and one
    # random expert gets no rows at all; the counts always sum to M.
    load = jax.random.normal(kw, (g,))
    load = jnp.where(jnp.arange(g) == jax.random.randint(ke, (), 0, g), -jnp.inf, load)
    expert = jax.random.categorical(ki, load, shape=(m,))
    group_sizes = jnp.bincount(expert, length=g).astype(jnp.int32)
    return (lhs, rhs, group_sizes), ()


def computation(lhs, rhs, group_sizes):
    """Correct for any group sizes (zero-sized groups included; rows past sum(group_sizes) give 0).

    A masked dense form (every row against every expert) would do G times the work, and
    jax.lax.ragged_dot is what a kernel replaces, so the reference pads each group to a multiple
    of TILE rows (at most M/TILE + G tiles), multiplies each tile by its group's matrix in a scan,
    and gathers the rows back.
    """
    m, k = lhs.shape
    g, _, n = rhs.shape
    num_tiles = -(-m // TILE) + g  # static bound on sum(ceil(group_sizes / TILE))
    gs = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(gs)
    starts = ends - gs
    tiles = (gs + TILE - 1) // TILE
    tile_ends = jnp.cumsum(tiles)
    tile_starts = tile_ends - tiles
    tile_group = jnp.minimum(jnp.searchsorted(tile_ends, jnp.arange(num_tiles), side="right"), g - 1)

    p = jnp.arange(num_tiles * TILE)  # a row of the padded layout
    pg = tile_group[p // TILE]
    offset = p - tile_starts[pg] * TILE
    valid = (p // TILE < tile_ends[-1]) & (offset < gs[pg])
    src = jnp.where(valid, starts[pg] + offset, 0)
    x_pad = jnp.where(valid[:, None], lhs[src], 0).reshape(num_tiles, TILE, k)

    def tile_matmul(_, xs):
        x_t, g_t = xs
        return None, jnp.dot(x_t, rhs[g_t], preferred_element_type=jnp.float32).astype(lhs.dtype)

    _, y_pad = jax.lax.scan(tile_matmul, None, (x_pad, tile_group))
    y_pad = y_pad.reshape(num_tiles * TILE, n)

    i = jnp.arange(m)
    gi = jnp.minimum(jnp.searchsorted(ends, i, side="right"), g - 1)
    in_group = i < ends[-1]
    dest = jnp.where(in_group, tile_starts[gi] * TILE + (i - starts[gi]), 0)
    return jnp.where(in_group[:, None], y_pad[dest], 0).astype(lhs.dtype)


def get_flops():
    m, k, n, g = SIZES["full"]
    return 2 * m * k * n  # each row is multiplied by exactly one expert matrix
