"""``maxkernel profile``: the cost model's table, XLA's estimate of the reference, measured times on a TPU."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .cli import judge_file
from .targets import TARGETS

MIB = 1 << 20


def _t(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:,.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.3f} ms"


def print_profile(evaluation, task, kernel: Path) -> None:
    console = Console(soft_wrap=True)
    model = evaluation.details.get("cost_model") or {}
    console.print(f"[bold]{kernel}[/] on task {task.id}, target {evaluation.target}: verdict "
                  f"[{'green' if evaluation.ok else 'red'}]{evaluation.status.value}[/] ({evaluation.reason})")
    if "kernels" not in model:
        console.print(f"No cost model: {model.get('error', 'the kernel did not trace')}")
        return
    chip = model["chip"]
    console.print(f"Chip ({chip['source']}): {chip['device_kind']}, HBM {chip['mem_bw_bytes_per_second'] / 1e9:,.0f} GB/s, "
                  f"bf16 {chip['bf16_ops_per_second'] / 1e12:,.0f} TFLOP/s, VMEM {chip['vmem_capacity_bytes'] / MIB:,.0f} MiB, "
                  f"MXU {chip['mxu_column_size']}x{chip['mxu_column_size']} x{chip['num_mxus']}, {chip['cores_per_device']} core(s)")
    for k in model["kernels"]:
        table = Table(title=f"cost model (ESTIMATE): {k['name']} grid {tuple(k['grid'])}, {k['steps']:,} steps")
        for col in ("", "value"):
            table.add_column(col)
        table.add_row("estimated time", f"{_t(k['seconds'])}  ({k['bound']}-bound)")
        table.add_row("  memory / compute / step overhead", f"{_t(k['memory_s'])} / {_t(k['compute_s'])} / {_t(k['overhead_s'])}")
        table.add_row("HBM traffic", f"{k['hbm_bytes'] / MIB:,.1f} MiB")
        table.add_row("FLOPs (MXU, padded)", f"{k['flops']:.4g} ({k['mxu_flops_padded']:.4g})")
        table.add_row("VMEM (blocks x buffers + scratch, tile-padded)",
                      f"{k['vmem_bytes'] / MIB:.2f} MiB of {k['vmem_limit_bytes'] / MIB:.0f} MiB scoped limit")
        table.add_row("cores used", str(k["cores_used"]))
        console.print(table)
        ops = Table("operand", "block", "dtype", "transfers", "HBM MiB", "x its size", "VMEM MiB",
                    title="traffic per BlockSpec")
        for o in sorted(k["operands"], key=lambda o: -o["hbm_bytes"]):
            ops.add_row(f"{o['role']} {o['index']}", "x".join(map(str, o["block_shape"])), o["dtype"],
                        f"{o['transfers']:,}", f"{o['hbm_bytes'] / MIB:,.1f}", f"{o['refetch']:.1f}",
                        f"{o['vmem_bytes'] / MIB:.2f}")
        console.print(ops)
    summary = Table("whole candidate", "value", title="summary (estimates unless marked measured)")
    summary.add_row("estimated time", _t(model["seconds"]))
    summary.add_row("arithmetic intensity", f"{model['arithmetic_intensity']:,.1f} FLOP/byte")
    summary.add_row("fraction of roofline (estimate)", f"{model['roofline_fraction']:.0%}")
    summary.add_row("XLA's estimate of the reference", _t(model.get("xla_reference_seconds")))
    speedup = model.get("speedup_vs_xla")
    summary.add_row("estimated speedup vs XLA", f"{speedup:.2f}x (estimate)" if speedup else "-")
    if evaluation.profile is not None and not evaluation.profile.estimated:
        p = evaluation.profile
        summary.add_row("[bold]measured device time[/]", f"{_t(p.seconds)} (median of {p.details.get('runs')})")
        summary.add_row("[bold]measured XLA reference[/]", _t(p.reference_seconds))
        summary.add_row("[bold]measured speedup[/]", f"{p.speedup:.2f}x" if p.speedup else "-")
    else:
        summary.add_row("measured device time", "not measured: no TPU attached")
    console.print(summary)
    console.print("[bold]Diagnosis[/] (estimate):")
    for line in model.get("diagnosis", []):
        console.print(f"  - {line}")


@click.command("profile")
@click.option("--task", "task_ref", required=True, help="Task id (searched in tasks.paths) or path.")
@click.option("--kernel", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--target", type=click.Choice(list(TARGETS)), default=None, help="TPU generation (default: run.target).")
@click.option("--json", "as_json", is_flag=True, help="Print the cost model, XLA's estimate and timings as JSON.")
@click.pass_context
def profile_command(ctx: click.Context, task_ref: str, kernel: Path, target: str | None, as_json: bool) -> int:
    """Estimate (and on a TPU, measure) KERNEL's speed on TASK, and say what bounds it."""
    task, evaluation = judge_file(ctx, task_ref, kernel, target)
    if as_json:
        measured = evaluation.profile if evaluation.profile and not evaluation.profile.estimated else None
        click.echo(json.dumps({
            "task": task.id, "target": evaluation.target, "status": evaluation.status.value, "reason": evaluation.reason,
            "cost_model": evaluation.details.get("cost_model"),
            "measured": {"seconds": measured.seconds, "reference_seconds": measured.reference_seconds,
                         **measured.details} if measured else None,
        }, default=str, sort_keys=True))
    else:
        print_profile(evaluation, task, kernel)
    return 0 if evaluation.ok else 1
