"""17p_Triangle_Multiplication: AlphaFold-2 triangle multiplicative update, outgoing edges (Algorithm 11)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (1536, 128, 128), "small": (128, 128, 128)}  # residues N, pair channels C, hidden c
EPS = 1e-5


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, c_z, c = SIZES[size]
    ks = jax.random.split(jax.random.key(seed), 14)

    def weight(k, fan_in, shape):
        return (jax.random.normal(k, shape, jnp.float32) / jnp.sqrt(fan_in)).astype(dtype)

    def near(k, shape, centre):
        return (centre + 0.1 * jax.random.normal(k, shape, jnp.float32)).astype(dtype)

    z = jax.random.normal(ks[0], (n, n, c_z), dtype)
    params = (
        near(ks[1], (c_z,), 1.0), near(ks[2], (c_z,), 0.0),            # input LayerNorm scale, offset
        weight(ks[3], c_z, (c_z, 2 * c)), near(ks[4], (2 * c,), 0.0),  # a|b projections
        weight(ks[5], c_z, (c_z, 2 * c)), near(ks[6], (2 * c,), 0.0),  # a|b gates
        near(ks[7], (c,), 1.0), near(ks[8], (c,), 0.0),                # output LayerNorm scale, offset
        weight(ks[9], c, (c, c_z)), near(ks[10], (c_z,), 0.0),         # output projection
        weight(ks[11], c_z, (c_z, c_z)), near(ks[12], (c_z,), 0.0),    # output gate
    )
    return (z, *params), ()


def _layer_norm(x, scale, offset):
    x = x.astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPS) * scale.astype(jnp.float32) + offset.astype(jnp.float32)


def _linear(x, w, b):
    return jnp.dot(x, w, preferred_element_type=jnp.float32) + b.astype(jnp.float32)


def computation(z, ln_in_scale, ln_in_offset, w_ab, b_ab, w_ab_gate, b_ab_gate,
                ln_out_scale, ln_out_offset, w_out, b_out, w_gate, b_gate):
    dtype = z.dtype
    c = w_out.shape[0]
    zn = _layer_norm(z, ln_in_scale, ln_in_offset).astype(dtype)
    ab = (jax.nn.sigmoid(_linear(zn, w_ab_gate, b_ab_gate)) * _linear(zn, w_ab, b_ab)).astype(dtype)
    a, b = ab[..., :c], ab[..., c:]
    # outgoing edges: o[i, j] = sum_k a[i, k] * b[j, k], channel by channel
    o = jnp.einsum("ikc,jkc->ijc", a, b, preferred_element_type=jnp.float32)
    on = _layer_norm(o, ln_out_scale, ln_out_offset).astype(dtype)
    out = _linear(on, w_out, b_out) * jax.nn.sigmoid(_linear(zn, w_gate, b_gate))
    return out.astype(dtype)


def get_flops():
    n, c_z, c = SIZES["full"]
    return (2 * n * n * c_z * 4 * c   # a, b projections and their gates
            + 2 * n * n * n * c       # the triangle product
            + 2 * n * n * c * c_z     # output projection
            + 2 * n * n * c_z * c_z)  # output gate
