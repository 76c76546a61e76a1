"""The offline synthesizer is an ordinary third-party plugin: the rest of maxkernel never needs it, its TPU
templates need only the core, its chip-neutral base and the TPU backend's public API, the chip-neutral base
names no chip and each chip's templates ignore the other's, and a user who asks for it without it is told how
to get it."""

from __future__ import annotations

import ast
import json
import sys
import textwrap

import pytest

from ..helpers import REPO, run_cli
from ..tpu_pallas.conftest import KERNELS, TASKS

OFFLINE = REPO / "synthesizers" / "tpu_offline" / "src" / "maxkernel_tpu_offline"
NEUTRAL = REPO / "synthesizers" / "synthesis" / "src" / "maxkernel_synthesis"
GPU_TEMPLATES = REPO / "synthesizers" / "gpu_offline" / "src" / "maxkernel_gpu_offline"
#: Everything but the synthesizer's packages (its base and each chip's templates).
OTHER_PACKAGES = [p for p in [*REPO.glob("src/*"), *REPO.glob("*/src/*"), *REPO.glob("*/*/src/*")]
                  if p.is_dir() and p.name.startswith("maxkernel") and p.parents[2].name != "synthesizers"]

# Makes the synthesizer's packages fail to import in the interpreter, as if their distributions were not installed.
BLOCKER = textwrap.dedent("""
    import sys
    class _Uninstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("maxkernel_synthesis", "maxkernel_tpu_offline", "maxkernel_gpu_offline"):
                raise ModuleNotFoundError(f"No module named {name!r}")
    sys.meta_path.insert(0, _Uninstalled())
""")
#: Its plugins: the provider (the base), the TPU templates, the GPU templates.
PLUGINS = "synthesizer,offline,gpu_offline"


def imported_modules(package) -> set[str]:
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
    return found


def test_no_other_package_imports_the_synthesizer():
    assert len(OTHER_PACKAGES) >= 6
    synthesizer = ("maxkernel_synthesis", "maxkernel_tpu_offline", "maxkernel_gpu_offline")
    for package in OTHER_PACKAGES:
        offenders = {m for m in imported_modules(package) if m.split(".")[0] in synthesizer}
        assert not offenders, f"{package.name} imports {offenders}"


def test_the_base_names_no_chip_and_the_chips_templates_ignore_each_other():
    """Installing the GPU templates pulls in nothing of the TPU's, and the reverse; the base is chip-neutral."""
    def chips(package) -> set[str]:
        found = {m for m in imported_modules(package) if m.split(".")[0] in (
            "maxkernel_tpu_offline", "maxkernel_gpu_offline", "maxkernel_tpu_pallas", "maxkernel_gpu_pallas")}
        return found | {m for m in imported_modules(package) if m.startswith("jax.experimental.pallas.")}

    assert not chips(NEUTRAL), chips(NEUTRAL)
    assert not {m for m in chips(GPU_TEMPLATES) if "tpu" in m}, chips(GPU_TEMPLATES)
    assert not {m for m in chips(OFFLINE) if "gpu" in m or "triton" in m}, chips(OFFLINE)
    assert any(m.startswith("maxkernel_synthesis") for m in imported_modules(GPU_TEMPLATES))
    assert any(m.startswith("maxkernel_synthesis") for m in imported_modules(OFFLINE))


def test_the_synthesizer_uses_only_the_backends_public_api():
    backend = {m for m in imported_modules(OFFLINE) if m.split(".")[0] == "maxkernel_tpu_pallas"}
    assert backend == {"maxkernel_tpu_pallas", "maxkernel_tpu_pallas.api"}, backend
    text = "\n".join(p.read_text() for p in OFFLINE.rglob("*.py"))
    assert "maxkernel_tpu_pallas import api" in text or "maxkernel_tpu_pallas.api" in text


def test_asking_for_it_when_it_is_absent_says_how_to_get_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {"MAXKERNEL_HOME": str(tmp_path / "home"), "MAXKERNEL_DISABLE_PLUGINS": PLUGINS}
    listed = run_cli("plugins", "--json", env=env, pythonpath=[tmp_path])
    assert listed.returncode == 0, listed.stderr
    assert "offline" not in [row["name"] for row in json.loads(listed.stdout)]
    for name in ("synthesizer", "offline"):  # its name, and its first name (an alias)
        result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--provider", name, env=env, pythonpath=[tmp_path])
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            f"Error: llm provider {name!r} is not installed (installed: gemini, litellm, replay); it comes with "
            "maxkernel-synthesis: pip install 'maxkernel[offline]' (in a checkout: pip install -e "
            "synthesizers/synthesis -e synthesizers/tpu_offline)")


@pytest.mark.slow
def test_everything_else_works_without_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {"MAXKERNEL_HOME": str(tmp_path / "home"), "MAXKERNEL_DISABLE_PLUGINS": PLUGINS}
    result = run_cli("eval", "--task", str(TASKS / "rmsnorm"), "--kernel", str(KERNELS / "honest_rmsnorm.py"),
                     "--json", env=env, pythonpath=[tmp_path], timeout=600)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"


ALONE = textwrap.dedent("""
    import sys
    from maxkernel_core import RunConfig
    from maxkernel_core.llm_roles import resolve_role_llms
    from maxkernel_core.config import Settings
    from maxkernel_core.plugins import get_plugin_manager
    from maxkernel_core.session import RunSession
    from maxkernel_core.store import RunStore

    pm = get_plugin_manager()
    assert {name for name, _ in pm.list_name_plugin()} >= {"synthesizer", "offline", "tpu_pallas"}
    assert not pm.registries.strategies, pm.registries.strategies
    settings = Settings()
    settings.run.provider = "offline"
    backend = pm.registries.get("backend", "tpu_pallas").cls(settings)
    task = backend.load_task(sys.argv[1])
    session = RunSession(pm, RunStore(sys.argv[2]), task, RunConfig(task.id, "none", "offline"), backend,
                         llms=resolve_role_llms(pm.registries, settings))
    candidate = session.implement(session.plan())
    verdict = session.evaluate(candidate)
    moves = session.neighbours(candidate)
    backend.close()
    print(verdict.status.value, candidate.space is not None, len(moves) > 0, session.plan(required=False))
""")


@pytest.mark.slow
def test_installed_alone_beside_the_core_and_the_backend_it_works(tmp_path):
    import subprocess

    env = {**__import__("os").environ, "MAXKERNEL_LOAD_PLUGINS": "synthesizer,offline,tpu_pallas,local_executor",
           "MAXKERNEL_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-c", ALONE, str(TASKS / "rmsnorm"), str(tmp_path / "runs.db")],
                            capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok", "True", "True", "None"]


def test_loading_the_plugins_imports_no_jax():
    """Every command loads every plugin; the synthesizer's roles bring jax in only when a role is asked of them
    (``maxkernel --help`` took 2.0 s with them, 0.55 s without)."""
    import subprocess

    code = ("import sys; from maxkernel_core.plugins import get_plugin_manager; pm = get_plugin_manager(); "
            "print(sorted(n for n in ('jax', 'jaxlib', 'maxkernel_synthesis.roles') if n in sys.modules), "
            "len(pm.get_plugins()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    imported, plugins = done.stdout.rsplit(" ", 1)
    assert done.returncode == 0 and imported == "[]" and int(plugins) > 5, done.stdout + done.stderr
