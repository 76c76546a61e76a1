"""A workload in the JAXBench module format: CONFIG, create_inputs, workload, get_flops."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "jb_softmax", "description": "Row softmax", "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
          "rows": 512, "cols": 1024}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(0), (CONFIG["rows"], CONFIG["cols"]), dtype),)


def workload(x):
    return jax.nn.softmax(x, axis=-1)


def get_flops():
    return 5 * CONFIG["rows"] * CONFIG["cols"]
