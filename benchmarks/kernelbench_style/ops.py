"""The operations of the KernelBench-style held-out set: written here, in the format, not copied from a suite.

Each op is (forward body, weights made in ``__init__``, inputs); sizes are module constants, as
KernelBench writes them. Level 1 is one operation; level 2 a matmul, batched matmul or convolution
followed by an epilogue chain.
"""

from __future__ import annotations

#: element-wise activations: name -> expression of ``x``
ACTIVATIONS = {
    "ReLU": "jax.nn.relu(x)",
    "LeakyReLU": "jnp.where(x > 0, x, 0.01 * x)",
    "GELU": "jax.nn.gelu(x, approximate=False)",
    "GELUTanh": "0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))",
    "Sigmoid": "jax.nn.sigmoid(x)",
    "Tanh": "jnp.tanh(x)",
    "Softplus": "jax.nn.softplus(x)",
    "ELU": "jnp.where(x > 0, x, jnp.expm1(x))",
    "SELU": "1.0507009873554805 * jnp.where(x > 0, x, 1.6732632423543772 * jnp.expm1(x))",
    "HardSigmoid": "jnp.clip(x / 6.0 + 0.5, 0.0, 1.0)",
    "HardTanh": "jnp.clip(x, -1.0, 1.0)",
    "Swish": "x * jax.nn.sigmoid(x)",
    "Softsign": "x / (1.0 + jnp.abs(x))",
    "Mish": "x * jnp.tanh(jax.nn.softplus(x))",
}

#: row-wise operations on (batch_size, dim): name -> (weights, body)
ROWWISE = {
    "Softmax": ([], "jax.nn.softmax(x, axis=1)"),
    "LogSoftmax": ([], "jax.nn.log_softmax(x, axis=1)"),
    "LayerNorm": (["self.gamma = jnp.ones((dim,))", "self.beta = jnp.zeros((dim,))"],
                  "(x - x.mean(axis=1, keepdims=True)) / jnp.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * self.gamma "
                  "+ self.beta"),
    "RMSNorm": (["self.weight = jnp.ones((dim,))"],
                "x / jnp.sqrt(jnp.mean(x * x, axis=1, keepdims=True) + 1e-6) * self.weight"),
    "L2Norm": ([], "x / jnp.linalg.norm(x, axis=1, keepdims=True)"),
    "LogSumExp": ([], "jax.nn.logsumexp(x, axis=1, keepdims=True)"),
}

#: reductions over dim 1 of (batch_size, dim1, dim2): name -> body
REDUCTIONS = {
    "Sum": "jnp.sum(x, axis=1)",
    "Mean": "jnp.mean(x, axis=1)",
    "Max": "jnp.max(x, axis=1)",
    "Min": "jnp.min(x, axis=1)",
    "Argmax": "jnp.argmax(x, axis=1)",
    "Argmin": "jnp.argmin(x, axis=1)",
    "Product": "jnp.prod(1.0 + 0.01 * x, axis=1)",
}

SCANS = {
    "Cumsum": "jnp.cumsum(x, axis=1)",
    "CumsumReverse": "jnp.flip(jnp.cumsum(jnp.flip(x, axis=1), axis=1), axis=1)",
    "CumsumExclusive": "jnp.cumsum(x, axis=1) - x",
    "Cumprod": "jnp.cumprod(1.0 + 0.001 * x, axis=1)",
}

#: losses of (predictions, targets) -> a scalar
LOSSES = {
    "MSELoss": "jnp.mean((predictions - targets) ** 2)",
    "HuberLoss": ("jnp.mean(jnp.where(jnp.abs(predictions - targets) < 1.0, 0.5 * (predictions - targets) ** 2, "
                  "jnp.abs(predictions - targets) - 0.5))"),
    "HingeLoss": "jnp.mean(jnp.maximum(0.0, 1.0 - predictions * jnp.sign(targets - 0.5)))",
    "KLDivLoss": ("jnp.sum(jax.nn.softmax(targets, axis=-1) * (jax.nn.log_softmax(targets, axis=-1) "
                  "- jax.nn.log_softmax(predictions, axis=-1))) / predictions.shape[0]"),
    "CosineSimilarityLoss": ("jnp.mean(1.0 - jnp.sum(predictions * targets, axis=1) / (jnp.linalg.norm(predictions, "
                             "axis=1) * jnp.linalg.norm(targets, axis=1) + 1e-8))"),
    "CrossEntropyLoss": "jnp.mean(jax.nn.logsumexp(predictions, axis=1) - jnp.sum(jax.nn.softmax(targets, axis=1) * predictions, axis=1))",
    "TripletMarginLoss": ("jnp.mean(jnp.maximum(jnp.linalg.norm(predictions - targets, axis=1) - "
                          "jnp.linalg.norm(predictions - jnp.roll(targets, 1, axis=0), axis=1) + 1.0, 0.0))"),
}

#: level-2 epilogues, each an expression of ``x`` (the row-wise ones read the last axis)
EPILOGUES = {
    "BiasAdd": ("self.bias", "x + self.bias"),
    "ReLU": (None, "jax.nn.relu(x)"),
    "GELU": (None, "jax.nn.gelu(x, approximate=False)"),
    "Sigmoid": (None, "jax.nn.sigmoid(x)"),
    "Tanh": (None, "jnp.tanh(x)"),
    "Scaling": (None, "x * 0.5"),
    "Divide": (None, "x / 2.0"),
    "Clamp": (None, "jnp.clip(x, -0.5, 0.5)"),
    "Mish": (None, "x * jnp.tanh(jax.nn.softplus(x))"),
    "Swish": (None, "x * jax.nn.sigmoid(x)"),
    "LeakyReLU": (None, "jnp.where(x > 0, x, 0.2 * x)"),
    "HardTanh": (None, "jnp.clip(x, -1.0, 1.0)"),
    "ResidualAdd": (None, "x + x * 0.1"),
    "Softmax": (None, "jax.nn.softmax(x, axis=-1)"),
    "LogSumExp": (None, "jax.nn.logsumexp(x, axis=-1, keepdims=True)"),
    "LayerNorm": (None, "(x - x.mean(axis=-1, keepdims=True)) / jnp.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)"),
}
