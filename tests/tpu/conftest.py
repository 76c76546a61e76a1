"""Tests that need an attached TPU (marked ``tpu``): ``make test-tpu`` on a TPU host; skipped everywhere else,
so CI, which has no accelerator, stays green. The chip is found as maxkernel finds it (its runtime, in a child
process); this test process never opens it: the judge's device worker does."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if "tpu" in item.keywords]
    if not marked:
        return
    from maxkernel_tpu_pallas.tpu_platform import TPU

    chip = TPU.found()
    if chip.attached:
        return
    skip = pytest.mark.skip(reason=f"needs a TPU: {chip.line()}")
    for item in marked:
        item.add_marker(skip)
