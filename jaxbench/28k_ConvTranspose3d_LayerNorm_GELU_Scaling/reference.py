"""28k_ConvTranspose3d_LayerNorm_GELU_Scaling: gelu(LayerNorm_lastaxis(conv_transpose3d(x) + b)) * 1.0, NCDHW."""
import jax
import jax.numpy as jnp

# N, C_in, D, H, W, C_out; the small size keeps W: the LayerNorm's [C_out] weight meets W_out = 2 W = 64
SIZES = {"full": (32, 32, 16, 32, 32, 64), "small": (2, 32, 2, 4, 32, 64)}
KERNEL, STRIDE, PADDING = 4, 2, 1
EPS = 1e-5
SCALING_FACTOR = 1.0


def get_inputs(dtype=jnp.bfloat16, size="full", seed=0):
    n, cin, d, h, w, cout = SIZES[size]
    k = KERNEL
    keys = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.uniform(keys[0], (n, cin, d, h, w), dtype)
    weight = (jax.random.normal(keys[1], (cin, cout, k, k, k), jnp.float32) / (cin * k**3 / 8) ** 0.5).astype(dtype)
    conv_bias = 0.1 * jax.random.normal(keys[2], (cout,), dtype)  # JAXBench: zeros
    ln_weight = 1.0 + 0.1 * jax.random.normal(keys[3], (cout,), dtype)  # JAXBench: ones
    ln_bias = 0.1 * jax.random.normal(keys[4], (cout,), dtype)  # JAXBench: zeros
    return (x, weight, conv_bias, ln_weight, ln_bias), ()


def computation(x, weight, conv_bias, ln_weight, ln_bias):
    k, stride, padding = KERNEL, STRIDE, PADDING
    x = jnp.transpose(x, (0, 2, 3, 4, 1))  # NDHWC
    kernel = jnp.flip(jnp.transpose(weight, (2, 3, 4, 1, 0)), axis=(0, 1, 2))  # DHW, out, in; flipped
    n, d, h, w, c = x.shape
    # ConvTranspose3d as JAXBench writes it: zeros between the input's voxels, then a dense convolution
    dilated = jnp.zeros((n, (d - 1) * stride + 1, (h - 1) * stride + 1, (w - 1) * stride + 1, c), x.dtype)
    dilated = dilated.at[:, ::stride, ::stride, ::stride, :].set(x)
    pad = k - 1 - padding
    y = jax.lax.conv_general_dilated(dilated, kernel, (1, 1, 1), ((pad, pad),) * 3,
                                     dimension_numbers=("NDHWC", "DHWOI", "NDHWC"))
    y = jnp.transpose(y + conv_bias, (0, 4, 1, 2, 3))  # NCDHW
    mean = jnp.mean(y, axis=-1, keepdims=True)  # over W: JAXBench normalises the last axis
    var = jnp.mean((y - mean) ** 2, axis=-1, keepdims=True)
    y = (y - mean) / jnp.sqrt(var + EPS) * ln_weight + ln_bias
    return jax.nn.gelu(y) * SCALING_FACTOR


def get_flops():
    """Every tap of the dense convolution that lands on the zero-dilated input (zeros included), as XLA
    counts the program JAXBench times; taps on the padding are not counted."""
    n, cin, d, h, w, cout = SIZES["full"]
    pad = KERNEL - 1 - PADDING
    taps = 1
    for s in (d, h, w):
        dilated = (s - 1) * STRIDE + 1
        out = dilated + 2 * pad - KERNEL + 1
        taps *= sum(1 for o in range(out) for t in range(KERNEL) if 0 <= o + t - pad < dilated)
    return 2 * n * cout * cin * taps
