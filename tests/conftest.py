from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .helpers import REPO

# Every scratch folder of this test session (workers', runs') lives in a private folder of its
# own, never loose in a /tmp that other processes on the machine share.
if not os.environ.get("MAXKERNEL_TEST_SCRATCH"):
    _scratch = tempfile.mkdtemp(prefix="maxkernel-tests-")
    os.environ["MAXKERNEL_TEST_SCRATCH"] = os.environ["TMPDIR"] = tempfile.tempdir = _scratch


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
