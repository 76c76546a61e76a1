"""Loading maxkernel's plugins leaves a process's JAX as it was; the process that runs a Pallas backend is kept
off the chip before its first use of JAX, unless a person chose its platform or its JAX already started."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import os, sys
import jax
from maxkernel_core import get_plugin_manager
pm = get_plugin_manager()
pm.hook.register_backends  # every built-in plugin's module is imported by now
assert [m for m in sys.modules if m.startswith("maxkernel_tpu_offline")], "the offline plugin was not loaded"
print("after plugins:", os.environ.get("JAX_PLATFORMS"), jax.config.jax_platforms)
if sys.argv[1] == "started":
    jax.devices()
from maxkernel_tpu_pallas.backend import TpuPallasBackend
TpuPallasBackend()
print("after backend:", os.environ.get("JAX_PLATFORMS"), jax.config.jax_platforms)
"""


def _run(case: str, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "ALLOW_MULTIPLE_LIBTPU_LOAD")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, case], env={**base, **env}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return [ln for ln in out.stdout.splitlines() if ln.startswith("after")]


def test_plugins_load_without_touching_jax_and_the_backend_keeps_its_process_on_the_cpu():
    assert _run("fresh") == ["after plugins: None None", "after backend: None cpu"]


@pytest.mark.parametrize("case, env, want", [
    ("fresh", {"JAX_PLATFORMS": "cpu,tpu"}, "after backend: cpu,tpu cpu,tpu"),  # a person's choice stands
    ("started", {}, "after backend: None None"),  # a JAX that chose its devices is not changed under it
])
def test_a_chosen_or_started_jax_is_left_as_it_is(case, env, want):
    assert _run(case, **env)[-1] == want
