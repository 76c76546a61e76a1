"""29k_Matmul_Swish_Sum_GroupNorm: GroupNorm(swish(x @ W + b) + bias), float32."""
import jax
import jax.numpy as jnp

# batch, in_features, out_features, num_groups (group size 128 at both sizes)
SIZES = {"full": (4096, 8192, 8192, 64), "small": (256, 512, 384, 3)}
EPS = 1e-5


def get_inputs(dtype=jnp.float32, size="full", seed=0):
    m, k, n, groups = SIZES[size]
    kx, kw, kb, kbias, kg, kbeta = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
    w = (jax.random.normal(kw, (k, n), jnp.float32) / jnp.sqrt(k)).astype(dtype)
    b = (0.1 * jax.random.normal(kb, (n,), jnp.float32)).astype(dtype)
    bias = jax.random.normal(kbias, (n,), jnp.float32).astype(dtype)  # the extra summed bias parameter
    gamma = (1.0 + 0.1 * jax.random.normal(kg, (n,), jnp.float32)).astype(dtype)
    beta = (0.1 * jax.random.normal(kbeta, (n,), jnp.float32)).astype(dtype)
    return (x, w, b, bias, gamma, beta), (groups, EPS)


def computation(x, w, b, bias, gamma, beta, num_groups, eps):
    y = x @ w + b                      # nn.Linear, W stored [in, out]
    y = y * jax.nn.sigmoid(y)          # Swish
    y = y + bias
    m, n = y.shape
    g = y.reshape(m, num_groups, n // num_groups)  # GroupNorm on (N, C): groups of consecutive channels
    mean = jnp.mean(g, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=-1, keepdims=True)  # biased variance, as PyTorch
    g = (g - mean) * jax.lax.rsqrt(var + eps)
    return g.reshape(m, n) * gamma + beta


def get_flops():
    m, k, n, _ = SIZES["full"]
    return 2 * m * k * n
