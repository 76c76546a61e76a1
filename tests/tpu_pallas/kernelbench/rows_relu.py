"""ReLU over 8192 x 1024 floats (32 MiB): over the CPU's full-size limit, so the judge derives a small size."""

import jax


class Model:
    def __init__(self):
        pass

    def forward(self, x):
        return jax.nn.relu(x)


rows = 8192
width = 1024


def get_inputs():
    return [jax.random.normal(jax.random.PRNGKey(0), (rows, width))]


def get_init_inputs():
    return []
