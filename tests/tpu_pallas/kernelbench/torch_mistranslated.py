"""A module whose JAX translation differs from PyTorch: it computes something else when its tensors are
torchax's, standing in for an op torchax translates wrongly."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if type(x).__module__.startswith("torchax"):
            return torch.relu(x) * 1.5
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
