"""The judge's fingerprint changes with everything a verdict depends on, and with nothing else."""

import shutil
from pathlib import Path

from maxkernel_tpu_pallas.backend import TpuPallasBackend

TASKS = Path(__file__).parent / "tasks"


def fingerprint(task_dir, target="v5e"):
    backend = TpuPallasBackend()
    return backend.judge_fingerprint(backend.load_task(str(task_dir)), target=target)


def test_fingerprint_is_stable_and_follows_task_files_target_and_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path / "home"))
    task = tmp_path / "matmul"
    shutil.copytree(TASKS / "matmul", task, ignore=shutil.ignore_patterns("__pycache__"))
    base = fingerprint(task)
    assert fingerprint(task) == base
    assert fingerprint(task, "v6e") != base
    reference = task / "reference.py"
    reference.write_text(reference.read_text() + "\n# an edited reference is another task\n")
    edited = fingerprint(task)
    assert edited != base
    calibration = tmp_path / "home" / "calibration" / "v5e.toml"
    calibration.parent.mkdir(parents=True)
    calibration.write_text('measured_on = "TPU v5 lite"\n[values]\nhbm_efficiency = 0.9\n')
    assert fingerprint(task) != edited  # a user calibration changes every estimate


def test_a_pytorch_tasks_fingerprint_follows_torch_and_torchax(monkeypatch):
    from maxkernel_pallas_judge.judge import fingerprint as module

    task = Path(__file__).parent / "kernelbench" / "torch_module.py"
    base = fingerprint(task)
    real = module.distribution_version
    monkeypatch.setattr(module, "distribution_version", lambda dist: "9.9" if dist == "torchax" else real(dist))
    assert fingerprint(task) != base  # another translation of the reference, another judge
    jax_task = Path(__file__).parent / "kernelbench" / "mse_loss.py"
    assert "torchax" not in fingerprint(jax_task)
