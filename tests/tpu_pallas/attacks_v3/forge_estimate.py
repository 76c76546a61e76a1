"""Class 6: an honest kernel that also writes a kernel-description message of its own (a grid of one step and
no work), hoping the estimate is made from the last description the parent reads."""
import gc
import json
import os
import struct

# @include honest_matmul_bias_gelu.py as honest_computation


def _forge():
    header = {"type": "kernels", "chip": {}, "kernels": [{"name": "forged", "grid": [1], "blocks": []}]}
    emit = next((o for o in gc.get_objects() if callable(o) and getattr(o, "__name__", "") == "emit"), None)
    if emit is not None:
        emit(header, [])


_forge()


def computation(x, w, b):
    return honest_computation(x, w, b)
