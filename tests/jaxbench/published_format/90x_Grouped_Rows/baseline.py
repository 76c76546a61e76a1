"""Row groups summed through a fixed-size window: the window size is a Python int among the inputs."""
import jax
import jax.numpy as jnp

CONFIG = {'name': 'grouped_rows', 'rows': 1024, 'cols': 256, 'groups': 8}


def create_inputs(dtype=jnp.float32):
    x = jax.random.normal(jax.random.key(0), (CONFIG['rows'], CONFIG['cols']), dtype=dtype)
    window = CONFIG['rows'] // CONFIG['groups']
    starts = jnp.arange(CONFIG['groups'], dtype=jnp.int32) * window
    return x, starts, window


def workload(x, starts, window):
    def one(start):  # a dynamic_slice needs its size as a Python int
        return jax.lax.dynamic_slice(x, (start, 0), (window, x.shape[1])).sum(axis=0)

    return jax.vmap(one)(starts)
