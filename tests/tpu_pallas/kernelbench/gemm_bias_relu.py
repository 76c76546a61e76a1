"""Linear layer with bias, then ReLU: a KernelBench-style task (level 2) whose full size is too big for a CPU
correctness run (32 MiB of activations), so the judge checks it at a derived small size."""

import jax
import jax.numpy as jnp


class Model:
    def __init__(self, in_features, out_features):
        self.weight = jnp.zeros((in_features, out_features))  # zeros, as JAXBench's translations leave them
        self.bias = jnp.zeros((out_features,))

    def forward(self, x):
        return jax.nn.relu(jnp.matmul(x, self.weight) + self.bias)


batch_size = 2048
in_features = 4096
out_features = 256


def get_inputs():
    return [jax.random.uniform(jax.random.PRNGKey(0), (batch_size, in_features))]


def get_init_inputs():
    return [in_features, out_features]
