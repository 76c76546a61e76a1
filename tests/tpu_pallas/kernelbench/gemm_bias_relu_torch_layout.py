"""gemm_bias_relu.py with JAXBench's set_weights, which takes PyTorch's (out, in) layout: the judge's weights are
the module's own (in, out), so calling it would transpose them."""

import jax
import jax.numpy as jnp


class Model:
    def __init__(self, in_features, out_features):
        self.weight = jnp.zeros((in_features, out_features))  # zeros, as JAXBench's translations leave them
        self.bias = jnp.zeros((out_features,))

    def set_weights(self, weights_dict):
        for name, value in weights_dict.items():
            setattr(self, name, jnp.transpose(value) if name == "weight" else jnp.array(value))

    def forward(self, x):
        return jax.nn.relu(jnp.matmul(x, self.weight) + self.bias)


batch_size = 2048
in_features = 4096
out_features = 256


def get_inputs():
    return [jax.random.uniform(jax.random.PRNGKey(0), (batch_size, in_features))]


def get_init_inputs():
    return [in_features, out_features]
