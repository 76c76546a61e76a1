"""33k_Conv3d_Mish_Tanh: tanh(mish(conv3d(x, W) + b)), NCDHW (KernelBench level 2 problem 47)."""
import jax
import jax.numpy as jnp

SIZES = {"full": (16, 32, 32, 64, 64, 64, 3), "small": (2, 32, 6, 10, 10, 64, 3)}  # N, C_in, D, H, W, C_out, kernel


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, d, h, w, cout, k = SIZES[size]
    keys = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.uniform(keys[0], (n, cin, d, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cout, cin, k, k, k), jnp.float32) / (cin * k**3) ** 0.5).astype(dtype)  # JAXBench: zeros
    bias = jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, bias), ()


def computation(x, weight, bias):
    y = jax.lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 4, 1)), jnp.transpose(weight, (2, 3, 4, 1, 0)),
                                     (1, 1, 1), ((0, 0), (0, 0), (0, 0)), dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    y = y + bias
    y = jnp.tanh(y * jnp.tanh(jnp.log(1 + jnp.exp(y))))  # tanh(mish(y)), softplus written out as JAXBench does
    return jnp.transpose(y, (0, 4, 1, 2, 3))


def get_flops():
    n, cin, d, h, w, cout, k = SIZES["full"]
    return 2 * n * cout * (d - k + 1) * (h - k + 1) * (w - k + 1) * cin * k**3
