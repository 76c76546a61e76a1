"""``maxkernel eval``: judge one kernel file against one task."""

from __future__ import annotations

import json
from pathlib import Path

import click
from maxkernel_core import Candidate, Provenance
from maxkernel_core.cli.app import app_for
from maxkernel_core.serialize import to_json
from maxkernel_core.speed import achieved_words, phrase
from rich.console import Console
from rich.table import Table

from .targets import TARGETS

STATUS_STYLE = {"ok": "bold green", "rejected": "bold red", "compile_error": "bold red", "incorrect": "bold red",
                "timeout": "bold yellow", "crashed": "bold yellow", "unverified": "bold yellow"}


def _print_evaluation(evaluation, task, kernel: Path) -> None:
    console = Console(soft_wrap=True)
    status = evaluation.status.value
    console.print(f"[{STATUS_STYLE[status]}]{status.upper()}[/] {kernel} on task {task.id} "
                  f"(target {evaluation.target})")
    console.print(f"  {evaluation.reason}")
    table = Table("check", "result", "detail", show_header=True)
    for check in evaluation.checks:
        detail = check.message if len(check.message) < 400 else check.message[:400] + " ..."
        table.add_row(check.name, "[green]pass[/]" if check.passed else "[red]FAIL[/]", detail)
    console.print(table)
    compile_info = evaluation.details.get("compile") or {}
    if compile_info.get("seconds") is not None and evaluation.status.value != "compile_error":
        mem = compile_info.get("memory") or {}
        console.print(f"  compile {compile_info['seconds']:.2f} s; HBM arguments {mem.get('argument_size_in_bytes', 0) / 2**20:.1f} MiB, "
                      f"outputs {mem.get('output_size_in_bytes', 0) / 2**20:.1f} MiB")
    vmem = [v for v in (evaluation.details.get("vmem_bytes_estimate") or []) if v]
    if vmem:
        console.print(f"  VMEM asked for by the kernel(s) (blocks x2 + scratch): {', '.join(f'{v / 2**20:.2f} MiB' for v in vmem)}")
    sandbox = evaluation.details.get("sandbox")
    if sandbox:
        checker = evaluation.details.get("checker_sandbox")
        console.print(f"  judged in sandbox: {sandbox}" + (f" (checker: {checker})" if checker else ""))
    timing = evaluation.details.get("timing")
    if isinstance(timing, str):
        console.print(f"  speed: {timing}")
    if evaluation.profile and evaluation.profile.seconds:
        console.print(f"  speed: {phrase(evaluation.profile)}")
        if evaluation.profile.achieved:
            console.print(f"    achieved: {achieved_words(evaluation.profile.achieved)}")


def read_kernel(path: Path) -> str:
    """A kernel file's text, or one line saying why it cannot be a Python module."""
    from maxkernel_core.errors import TaskError

    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"kernel file {path} is not UTF-8 text (byte {exc.start}): give the Python source of a "
                        "module that defines computation()") from None
    except OSError as exc:
        raise TaskError(f"kernel file {path} cannot be read: {exc.strerror}") from None


def judge_file(ctx: click.Context, task_ref: str, kernel: Path, target: str | None, backend_name: str = "tpu_pallas"):
    """Load the task, judge the kernel file as a user's candidate on ``backend_name`` (any Pallas backend: they
    share the judge); (task, evaluation)."""
    app = app_for(ctx)
    app.override(run__target=(target, "--target"))
    backend = app.backend(backend_name)
    try:
        backend.check_target(app.settings.run.target)  # an unknown target is refused before anything starts
        task = backend.load_task(task_ref, tuple(app.task_roots(backend)))
        candidate = Candidate(task.id, read_kernel(kernel), provenance=Provenance(role="user", transformation=str(kernel)))
        return task, backend.evaluate(task, candidate, target=app.settings.run.target)
    finally:
        backend.close()


@click.command("eval")
@click.option("--task", "task_ref", required=True, help="Task id (searched in tasks.paths) or path.")
@click.option("--kernel", "kernel", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Candidate module defining computation().")
@click.option("--backend", "backend_name", default="tpu_pallas", show_default=True,
              help="The Pallas backend that judges it (gpu_pallas judges a GPU kernel).")
@click.option("--target", default=None, help=f"The backend's target (TPU: {', '.join(TARGETS)}; default: run.target).")
@click.option("--json", "as_json", is_flag=True, help="Print the Evaluation record as one JSON object.")
@click.pass_context
def eval_command(ctx: click.Context, task_ref: str, kernel: Path, backend_name: str, target: str | None,
                 as_json: bool) -> int:
    """Judge KERNEL against TASK: trace, proof of kernel, TPU compile, correctness (exit 0 ok, 1 failed)."""
    task, evaluation = judge_file(ctx, task_ref, kernel, target, backend_name)
    if as_json:
        click.echo(json.dumps(to_json(evaluation), sort_keys=True, default=str))
    else:
        _print_evaluation(evaluation, task, kernel)
    return 0 if evaluation.ok else 1
