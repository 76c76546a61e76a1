from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO


@pytest.fixture(scope="session")
def example_plugin_dir(tmp_path_factory) -> Path:
    """The docs/examples strategy plugin, pip-installed into a folder put on PYTHONPATH.

    Installing with --target keeps the test environment itself untouched while the
    plugin is found exactly as an installed third-party distribution is: through
    its dist-info entry points.
    """
    target = tmp_path_factory.mktemp("example-plugin")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(REPO / "docs" / "examples" / "maxkernel-best-of-n")],
        check=True, capture_output=True, text=True,
    )
    return target
