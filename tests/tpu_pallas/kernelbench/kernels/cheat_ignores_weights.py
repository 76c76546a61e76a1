"""A cheat: the honest kernel, run on the zero weights its own __init__ made instead of the task's (which the
judge sets as attributes before forward), as a kernel tuned to JAXBench's all-zero weights would."""

import jax.numpy as jnp

# @include gemm_bias_relu_modelnew.py

_Honest = ModelNew  # noqa: F821  (defined by the include above)


class ModelNew(_Honest):
    def __init__(self, in_features, out_features):
        self.own = (jnp.zeros((in_features, out_features)), jnp.zeros((out_features,)))

    def forward(self, x):
        self.weight, self.bias = self.own  # the task's weights, set by the judge, are dropped here
        return super().forward(x)
