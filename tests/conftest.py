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
    # A store nobody configured (an evaluator made in a test, a CLI run without --home) lands there too, never
    # in the user's data folder, where two test processes would share it.
    os.environ.setdefault("MAXKERNEL_HOME", os.path.join(_scratch, "home"))
    # The test tasks' references, computed once per session and read by every worker and CLI run after it
    # (each test has a store of its own, so the store's own references/ would be built again in each).
    os.environ.setdefault("MAXKERNEL_EVAL_REFERENCE_CACHE", os.path.join(_scratch, "references"))


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


# The longest test files first (measured on the 2-core build machine, slowest first). `make test` runs
# `--dist loadfile --no-loadscope-reorder`: xdist hands files to whichever worker is free in collection
# order, so the longest start first and the suite does not end with one worker alone on a long file
# (xdist's own reorder, by number of tests, put the few-but-slow files last: 9 of 25 minutes on one core).
LONGEST_FIRST = (
    "tests/strategies/test_graph.py", "tests/executors/test_ray_cluster.py",
    "tests/tpu_pallas/test_experts.py", "tests/offline/test_synthesizer.py", "tests/tpu_pallas/test_profile.py",
    "tests/tpu_pallas/test_evaluation.py", "tests/strategies/test_run.py", "tests/bench/test_bench_cli.py",
    "tests/ui/test_hitl_in_the_browser.py",
    "tests/offline/test_staged.py", "tests/tpu_pallas/test_attacks.py", "tests/tpu_pallas/test_device_path.py",
    "tests/strategies/test_hitl.py",
    "tests/core/test_user_view.py", "tests/llm/test_cli_over_http.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: a file's order kept


from .browser import browser, page  # noqa: E402, F401  (fixtures: any test may open a page)
