"""A bf16 GEMM at Llama-3.1-70B's hidden -> MLP size, in JAXBench's workload format."""
import jax
import jax.numpy as jnp

CONFIG = {
    'name': 'gemm_llama70b',
    'M': 8192,
    'K': 8192,
    'N': 28672,
}


def create_inputs(dtype=jnp.float32):
    ka, kb = jax.random.split(jax.random.key(7))
    a = jax.random.normal(ka, (CONFIG['M'], CONFIG['K']), dtype=dtype)
    b = jax.random.normal(kb, (CONFIG['K'], CONFIG['N']), dtype=dtype)
    return a, b


def workload(a, b):
    return a @ b


def get_flops():
    return 2 * CONFIG['M'] * CONFIG['K'] * CONFIG['N']
