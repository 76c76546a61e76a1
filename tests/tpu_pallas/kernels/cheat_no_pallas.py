import jax.numpy as jnp


def computation(x, y):
    return jnp.dot(x, y)
