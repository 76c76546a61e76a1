"""``maxkernel profile``: the speed model's view of a kernel and of the XLA reference, measured times on a TPU.

With ``--kernel``, the kernel is judged and its estimate (kernels, code around them) printed beside the
estimate of the XLA reference; without it, the XLA reference alone, op by op. Every figure says whether it
is an estimate or a measurement, and a speedup divides like by like.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from attrs import asdict
from maxkernel_core.cli.output import console_for
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from maxkernel_core import Achieved
from maxkernel_core.speed import achieved_words, versus

from .cli import judge_file
from .targets import TARGETS, check_target

MIB = 1 << 20


def _t(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:,.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.3f} ms"


def print_reference(console: Console, xla: dict | str | None, measured_s: float | None = None,
                    not_measured: str = "not measured: no TPU attached") -> None:
    """The XLA reference's estimate, op by op (and its measured time on a TPU, or why there is none)."""
    if not isinstance(xla, dict):
        console.print(f"XLA reference: {xla or 'no estimate'}")
        return
    precision = xla.get("precision") or {}
    console.print(f"[bold]XLA reference (ESTIMATE)[/]: {_t(xla['seconds'])} over {xla['launches']:,} op launches "
                  f"({xla['ops']} ops); matmul precision {precision.get('estimated_at', precision.get('precision', 'default'))}"
                  f" (as jax.jit runs it); the task's tolerance needs {precision.get('precision', 'default')}: "
                  f"{precision.get('why', '')}")
    table = Table("op", "what", "runs", "HBM MiB", "GFLOP", "bound", "time (all runs)", title="costliest ops")
    for op in xla["top_ops"]:
        table.add_row(op["name"], op["label"][-48:], f"{op['trips']:,}", f"{op['hbm_bytes'] / MIB:,.1f}",
                      f"{op['flops'] / 1e9:,.1f}", op["unit"], _t(op["seconds"]))
    console.print(table)
    for note in xla.get("notes") or []:
        console.print(f"  note: {note}")
    console.print(f"  parameters: {xla.get('params_source', '')}")
    if xla.get("libtpu_optimal_seconds"):
        console.print(f"  for comparison, libtpu's own optimal_seconds (a bare roofline, not used): "
                      f"{_t(xla['libtpu_optimal_seconds'])}")
    console.print(f"  measured: {_t(measured_s)} (device trace, median)" if measured_s else f"  measured: {not_measured}")


def compiled(evaluation) -> bool:
    """Whether the kernel compiled: a kernel the compiler refused has no speed, estimated or measured."""
    return evaluation.status.value != "compile_error"


def print_compile_failure(console: Console, evaluation) -> None:
    """No time, no roofline: the compiler's words, the line, and what the blocks need against what the chip has."""
    error = evaluation.compile_error
    where = f" (candidate line {error.line})" if error and error.line else ""
    console.print(f"[bold]No speed[/]: the kernel does not compile for {evaluation.target}{where}, so it has no "
                  "time, estimated or measured, and no fraction of the roofline.")
    if error is not None and error.message[:200] not in evaluation.reason:  # the verdict line may hold it already
        console.print(escape(error.message), markup=False, highlight=False)
    for line in evaluation.estimate.diagnosis if evaluation.estimate is not None else ():
        if "VMEM" in line:
            console.print(f"  - blocks: {escape(line)}")


def print_kernels(console: Console, model) -> None:
    """The chip the model used, then each kernel's estimated time and the traffic of each of its blocks."""
    chip = model.chip
    console.print(f"Chip ({chip['source']}): {chip['device_kind']}, HBM {chip['mem_bw_bytes_per_second'] / 1e9:,.0f} GB/s, "
                  f"bf16 {chip['bf16_ops_per_second'] / 1e12:,.0f} TFLOP/s, VMEM {chip['vmem_capacity_bytes'] / MIB:,.0f} MiB, "
                  f"MXU {chip['mxu_column_size']}x{chip['mxu_column_size']} x{chip['num_mxus']}, {chip['cores_per_device']} core(s)")
    for k in model.kernels:
        # the kernel's name is the candidate's (pallas_call(name=...)): text, never markup
        table = Table(title=f"cost model (ESTIMATE): {escape(k.name)} grid {tuple(k.grid)}, {k.steps:,} steps")
        for col in ("", "value"):
            table.add_column(col)
        table.add_row("estimated time", f"{_t(k.seconds)}  ({k.bound}-bound)")
        table.add_row("  memory / compute / step overhead", f"{_t(k.memory_s)} / {_t(k.compute_s)} / {_t(k.overhead_s)}")
        table.add_row("HBM traffic", f"{k.hbm_bytes / MIB:,.1f} MiB")
        table.add_row("FLOPs (MXU, padded)", f"{k.flops:.4g} ({k.mxu_flops_padded:.4g})")
        table.add_row("VMEM (blocks x buffers + scratch, tile-padded)",
                      f"{k.vmem_bytes / MIB:.2f} MiB of {k.vmem_limit_bytes / MIB:.0f} MiB scoped limit")
        table.add_row("cores used", str(k.cores_used))
        console.print(table)
        ops = Table("operand", "block", "dtype", "transfers", "HBM MiB", "x its size", "VMEM MiB",
                    title="traffic per BlockSpec")
        for o in sorted(k.operands, key=lambda o: -o.hbm_bytes):
            ops.add_row(f"{o.role} {o.index}", "x".join(map(str, o.block_shape)), o.dtype, f"{o.transfers:,}",
                        f"{o.hbm_bytes / MIB:,.1f}", f"{o.refetch:.1f}", f"{o.vmem_bytes / MIB:.2f}")
        console.print(ops)


def print_profile(evaluation, task, kernel: Path) -> None:
    console = console_for()
    est = evaluation.estimate
    console.print(f"[bold]{kernel}[/] on task {task.id}, target {evaluation.target}: verdict "
                  f"[{'green' if evaluation.ok else 'red'}]{evaluation.status.value}[/] ({escape(evaluation.reason)})")
    if not compiled(evaluation):
        print_compile_failure(console, evaluation)
        return
    if est is None or est.model is None:
        console.print(f"No cost model: {evaluation.details.get('no_estimate', 'the kernel did not trace')}")
        return
    model = est.model
    print_kernels(console, model)
    summary = Table("whole candidate", "value", title="summary (estimates unless marked measured)")
    summary.add_row("estimated time", _t(est.seconds))
    summary.add_row("arithmetic intensity", f"{est.arithmetic_intensity:,.1f} FLOP/byte")
    summary.add_row("fraction of roofline (estimate)", f"{est.roofline_fraction:.0%}")
    summary.add_row("code around the kernels (estimate)", _t(model.glue_seconds))
    summary.add_row("XLA reference (estimate, same model)", _t(est.reference_seconds))
    summary.add_row("speedup vs XLA", f"{est.speedup:.2f}x (estimated / estimated)" if est.speedup else "-")
    summary.add_row("model parameters", model.params_source)
    if evaluation.profile is not None and not evaluation.profile.estimated:
        p = evaluation.profile
        timing = p.details
        summary.add_row("[bold]measured device time[/]", f"{_t(p.seconds)} on {p.chip} (median of {timing.get('runs')}; "
                        f"wall clock {_t(timing.get('wall_median_s'))})")
        summary.add_row("[bold]  achieved[/]", achieved_words(p.achieved))
        reference = timing.get("reference") or {}
        summary.add_row("[bold]measured XLA reference[/]", f"{_t(p.reference_seconds)} (wall clock "
                        f"{_t(reference.get('wall_median_s'))})")
        summary.add_row("[bold]  achieved[/]", achieved_words(Achieved(**reference["achieved"]))
                        if reference.get("achieved") else "-")
        summary.add_row("[bold]measured against XLA[/]", versus(p) or "-")
    else:
        timing = evaluation.details.get("timing")
        summary.add_row("measured device time", timing if isinstance(timing, str) else "not measured")
    console.print(summary)
    console.print("[bold]Diagnosis[/] (estimate):")
    for line in est.diagnosis:
        console.print(f"  - {escape(line)}")
    p = evaluation.profile
    measured = p is not None and not p.estimated and p.reference_measured
    timing = evaluation.details.get("timing")
    print_reference(console, evaluation.details.get("xla_reference"), p.reference_seconds if measured else None,
                    timing if isinstance(timing, str) else "not measured")


def estimate_json(evaluation) -> dict | None:
    """The estimate for ``--json``: how the model reached it (its breakdown), with the figure's own numbers and
    its ratio to the same model's XLA time; None without one, or for a kernel that does not compile."""
    est = evaluation.estimate
    if not compiled(evaluation) or est is None or est.model is None:
        return None
    return {**asdict(est.model), "estimated": True, "diagnosis": list(est.diagnosis),
            "arithmetic_intensity": est.arithmetic_intensity, "roofline_fraction": est.roofline_fraction,
            "fits_vmem": est.fits_memory, "xla_reference_seconds": est.reference_seconds,
            "speedup_vs_xla": est.speedup, "speedup_kind": est.speed.comparison}


def reference_profile(ctx: click.Context, task_ref: str, target: str | None) -> tuple[object, dict]:
    """Run the task's reference job only: (task, what the record would hold of the XLA reference)."""
    from maxkernel_core.cli.app import app_for

    from maxkernel_pallas_judge.judge.verdict import reference_details

    app = app_for(ctx)
    app.override(run__target=(target, "--target"))
    backend = app.backend("tpu_pallas")
    try:
        task = backend.load_task(task_ref, tuple(app.task_roots(backend)))
        ref = backend.evaluator.reference(task, check_target(app.settings.run.target))
    finally:
        backend.close()
    measured = {"measured_s": ref.chip.timing.median_s if ref.chip else None,
                "measured_on": ref.chip.device_kind if ref.chip else None, "not_measured": ref.chip_note,
                "trace": ref.chip.trace if ref.chip else None}
    if ref.xla_estimate is None:
        why = ((ref.xla or {}).get("error") or {}).get("message") or "the compiled program was not described"
        return task, {"target": app.settings.run.target, "estimate": f"no XLA estimate of the reference: {why[:300]}",
                      **measured}
    return task, {"target": app.settings.run.target, "estimate": reference_details(ref), **measured}


@click.command("profile")
@click.option("--task", "task_ref", required=True, help="Task id (searched in tasks.paths) or path.")
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The kernel to profile; without it, the task's XLA reference alone.")
@click.option("--target", type=click.Choice(list(TARGETS)), default=None, help="TPU generation (default: run.target).")
@click.option("--json", "as_json", is_flag=True, help="Print the estimates and timings as JSON.")
@click.pass_context
def profile_command(ctx: click.Context, task_ref: str, kernel: Path | None, target: str | None, as_json: bool) -> int:
    """Estimate (and on a TPU, measure) KERNEL's speed on TASK, or the XLA reference's alone, and say what
    bounds it."""
    if kernel is None:
        task, ref = reference_profile(ctx, task_ref, target)
        if as_json:
            click.echo(json.dumps({"task": task.id, "reference": ref}, default=str, sort_keys=True))
        else:
            console = console_for()
            console.print(f"[bold]{task.id}[/]: the XLA reference on {ref['target']}")
            print_reference(console, ref["estimate"], ref["measured_s"], ref["not_measured"])
        return 0
    task, evaluation = judge_file(ctx, task_ref, kernel, target)
    if as_json:
        measured = evaluation.profile if evaluation.profile and not evaluation.profile.estimated else None
        click.echo(json.dumps({
            "task": task.id, "target": evaluation.target, "status": evaluation.status.value, "reason": evaluation.reason,
            "cost_model": estimate_json(evaluation), "reference": evaluation.details.get("xla_reference"),
            "measured": {"seconds": measured.seconds, "reference_seconds": measured.reference_seconds,
                         "speedup_kind": "measured/measured", **measured.details} if measured else None,
        }, default=str, sort_keys=True))
    else:
        print_profile(evaluation, task, kernel)
    return 0 if evaluation.ok else 1
