import jax
import jax.numpy as jnp

# B, query heads, kv heads, S, D; the group size differs between the sizes (4 and 2)
SIZES = {"full": (2, 16, 4, 2048, 128), "small": (1, 4, 2, 256, 128)}


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    b, hq, hkv, s, d = SIZES[size]
    kq, kk, kv, kb = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(kq, (b, hq, s, d), dtype)
    k = jax.random.normal(kk, (b, hkv, s, d), dtype)
    v = jax.random.normal(kv, (b, hkv, s, d), dtype)
    bias = jax.random.normal(kb, (hq, s, s), dtype)
    return (q, k, v, bias), ()


def computation(q, k, v, bias):
    group = q.shape[1] // k.shape[1]
    k = jnp.repeat(k, group, axis=1)
    v = jnp.repeat(v, group, axis=1)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5 + bias[None]
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def get_flops():
    b, hq, hkv, s, d = SIZES["full"]
    return 2 * 2 * b * hq * s * s * d
