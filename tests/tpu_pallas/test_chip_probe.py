"""Finding the chip: asked of its runtime (jax.devices in a child process), never of device-file globs; a host's
answer kept per boot; a chip another process holds is attached, busy."""

from __future__ import annotations

import os
import textwrap

import pytest
from maxkernel_pallas_judge import chip_probe
from maxkernel_pallas_judge.chip_probe import ChipFound, ask_runtime, found
from maxkernel_tpu_pallas.tpu_platform import TPU


def _fake_jax(root, body: str):
    """A package named jax, first on the child's import path, whose devices() answers as ``body`` says."""
    (root / "jax").mkdir(parents=True)
    (root / "jax" / "__init__.py").write_text(textwrap.dedent(body))
    return root


def _child_path(monkeypatch, root):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))


def test_a_tpu_the_runtime_lists_is_attached_whatever_dev_holds(tmp_path, monkeypatch):
    _child_path(monkeypatch, _fake_jax(tmp_path, """
        class _D:
            device_kind = "TPU v5 lite"
            platform = "tpu"
        def devices(name):
            import os
            assert os.environ["JAX_PLATFORMS"] == name  # the child asks for the chip alone
            return [_D()]
    """))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # what the orchestrator sets for itself must not reach the child
    chip = ask_runtime("tpu")
    assert chip == ChipFound("tpu", True, "TPU v5 lite", 1, "jax.devices('tpu') in a child process")
    assert chip.line() == "TPU v5 lite attached (jax.devices('tpu') in a child process)"


_HELD = """
    def devices(name):
        raise RuntimeError("TPU initialization failed: The TPU is already in use by process with pid 4242.")
"""


def test_a_chip_held_by_another_process_is_attached_and_busy(tmp_path, monkeypatch):
    _child_path(monkeypatch, _fake_jax(tmp_path, _HELD))
    monkeypatch.setattr(chip_probe, "BUSY_RETRIES_S", (0.0,))
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-4")  # a host that shows a chip (the lent one does)
    chip = ask_runtime("tpu", shows_chip=TPU.shows_chip)
    assert chip.attached and chip.busy and "held by another process" in chip.how


def test_a_lock_held_on_a_host_without_a_chip_is_no_answer(tmp_path, monkeypatch):
    """libtpu takes its lock before it looks for a device: two probes at once on a host with none must not make
    one of them find a TPU (CI, two test processes)."""
    _child_path(monkeypatch, _fake_jax(tmp_path, _HELD))
    monkeypatch.setattr(chip_probe, "BUSY_RETRIES_S", (0.0, 0.0))
    chip = ask_runtime("tpu", shows_chip=lambda: False)
    assert not chip.attached and not chip.definite and "lock stayed held" in chip.how


def test_a_busy_answer_is_asked_again_and_the_runtime_then_decides(tmp_path, monkeypatch):
    answers = iter([ChipFound("tpu", True, "", 0, "h", busy=True), ChipFound("tpu", False, how="no TPU here")])
    monkeypatch.setattr(chip_probe, "_ask_once", lambda platform, timeout_s: next(answers))
    monkeypatch.setattr(chip_probe, "BUSY_RETRIES_S", (0.0, 0.0))
    assert ask_runtime("tpu") == ChipFound("tpu", False, how="no TPU here")


def test_no_tpu_here_says_what_the_runtime_said():
    chip = ask_runtime("tpu")  # this machine has libtpu and no chip
    assert not chip.attached and "jax.devices('tpu') in a child process" in chip.how
    assert "JAX_PLATFORMS=''" not in chip.how  # jax's hint about another setting is left out


def test_the_answer_is_kept_per_boot_and_asked_again_on_refresh(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(chip_probe, "_memo", {})
    monkeypatch.setattr(chip_probe, "ask_runtime", lambda p, **_: asked.append(p) or ChipFound(p, True, "TPU v6 lite", 4, "t"))
    assert found("tpu", cache_dir=tmp_path).kind == "TPU v6 lite" and asked == ["tpu"]
    monkeypatch.setattr(chip_probe, "_memo", {})  # a new process: the file answers
    assert found("tpu", cache_dir=tmp_path).count == 4 and asked == ["tpu"]
    assert found("tpu", cache_dir=tmp_path, refresh=True) and asked == ["tpu", "tpu"]
    files = list((tmp_path / "chips").iterdir())
    assert len(files) == 1 and files[0].name.startswith("tpu-")


@pytest.mark.parametrize("kind, target", [("TPU v5 lite", "v5e"), ("TPU v6 lite", "v6e"), ("TPU v4", "v4"),
                                          ("TPU v9 giant", None)])
def test_the_attached_kind_names_the_target_measured(monkeypatch, kind, target):
    monkeypatch.setattr(chip_probe, "found", lambda platform, **_: ChipFound(platform, True, kind, 1, "t"))
    assert TPU.attached_target() == target


def test_a_target_other_than_the_attached_chip_is_not_measured_and_says_how_to(monkeypatch):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    monkeypatch.setattr(chip_probe, "found", lambda platform, **_: ChipFound(platform, True, "TPU v6 lite", 1, "t"))
    evaluator = Evaluator(Limits(platform=TPU.spec), spares=0)  # starts no worker
    try:
        assert evaluator.pool.on_device
        assert evaluator.measures("v6e") == (True, "")
        ok, why = evaluator.measures("v5e")
        assert not ok and why.startswith("not measured: the attached TPU is TPU v6 lite (v6e), not the target v5e")
        assert why.endswith("pass --target v6e to measure on it")
    finally:
        evaluator.close()
