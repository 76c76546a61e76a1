"""relu(x @ w + b) at a size a CPU checks at full size, in JAXBench's workload format."""
import jax
import jax.numpy as jnp

CONFIG = {'name': 'small_gemm', 'M': 256, 'K': 512, 'N': 384}


def create_inputs(dtype=jnp.float32):
    kx, kw, kb = jax.random.split(jax.random.key(3), 3)
    x = jax.random.normal(kx, (CONFIG['M'], CONFIG['K']), dtype=dtype)
    w = jax.random.normal(kw, (CONFIG['K'], CONFIG['N']), dtype=dtype) * 0.05
    b = jax.random.normal(kb, (CONFIG['N'],), dtype=dtype)
    return x, w, b


def workload(x, w, b):
    return jax.nn.relu(x @ w + b)


def get_flops():
    return 2 * CONFIG['M'] * CONFIG['K'] * CONFIG['N']
