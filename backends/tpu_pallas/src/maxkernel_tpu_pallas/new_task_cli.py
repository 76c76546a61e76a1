"""``maxkernel new-task NAME``: write a task folder that loads and runs, from a template or your own function."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
from maxkernel_core import TaskError

from .new_task import (
    ArgSpec,
    count_flops,
    function_source,
    inputs_source,
    parse_args,
    small_specs,
    tolerance,
    yaml_text,
)

TEMPLATES = {
    "matmul": ("import jax.numpy as jnp\n\n\ndef matmul_bias_relu(x, w, b):\n"
               "    y = jnp.dot(x, w, preferred_element_type=jnp.float32) + b.astype(jnp.float32)\n"
               "    return jnp.maximum(y, 0).astype(x.dtype)\n",
               "matmul_bias_relu", "bf16[4096,4096] bf16[4096,4096] bf16[4096]",
               "x @ w + b, then ReLU; bf16 inputs, f32 accumulation"),
    "rowwise": ("import jax\nimport jax.numpy as jnp\n\n\ndef rmsnorm(x, scale):\n"
                "    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)\n"
                "    return x * jax.lax.rsqrt(ms + 1e-6) * scale\n",
                "rmsnorm", "f32[8192,4096] f32[4096]", "RMS normalisation over the last axis, then a scale"),
    "elementwise": ("import jax\n\n\ndef gelu(x):\n    return jax.nn.gelu(x)\n",
                    "gelu", "bf16[8192,8192]", "GELU (tanh approximation), elementwise"),
}


def _user_function(spec: str):
    """``module:function`` imported from the working directory (or anywhere on sys.path)."""
    if ":" not in spec:
        raise click.BadParameter("write it as module:function, e.g. mymodel:attention", param_hint="--from")
    module_name, name = spec.split(":", 1)
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="--from") from None
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise click.BadParameter(f"{module_name} has no function {name!r}", param_hint="--from")
    source, entry = function_source(fn)
    return fn, source, entry


def _namespace_fn(source: str, entry: str):
    namespace: dict = {"__name__": "maxkernel_new_task"}
    exec(compile(source, "<template>", "exec"), namespace)  # our own template text, not user input
    return namespace[entry]


def _specs(text: str, option: str) -> list[ArgSpec]:
    try:
        return parse_args(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _check_runs(fn, specs: list[ArgSpec], size: str) -> None:
    import jax

    try:
        jax.eval_shape(fn, *[jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs])
    except Exception as exc:  # the user's function at these shapes: say which size and why
        raise TaskError(f"the function does not trace at the {size} size ({', '.join(s.text() for s in specs)}): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}; give --small-args (or fix "
                        "--example-args)") from None


@click.command("new-task")
@click.argument("name")
@click.option("--template", type=click.Choice(sorted(TEMPLATES)), default="matmul", show_default=True,
              help="The operator to start from (ignored with --from).")
@click.option("--from", "source_spec", metavar="MODULE:FUNCTION",
              help="Your own (jitted or plain) JAX function; its whole module is copied into the task.")
@click.option("--example-args", metavar="'f32[4096,1024] bf16[1024]'",
              help="The arguments at full size, dtype[dims] each (required with --from).")
@click.option("--small-args", metavar="'f32[256,1024] ...'",
              help="The arguments at the size checked on a CPU (default: scaled down to under 4 MiB).")
@click.option("--description", help="One line on what the operator computes.")
@click.option("--dir", "parent", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where the task folder NAME is written.")
@click.option("--force", is_flag=True, help="Overwrite an existing folder's two files.")
def new_task_command(name, template, source_spec, example_args, small_args, description, parent, force) -> int:
    """Write a task folder NAME (reference.py, kernel_task.yaml) that `maxkernel run --task NAME` runs."""
    if source_spec:
        if not example_args:
            raise click.BadParameter("give the full-size arguments, e.g. --example-args 'f32[4096,1024]'",
                                     param_hint="--example-args")
        fn, source, entry = _user_function(source_spec)
        description = description or f"{entry} from {source_spec}"
    else:
        source, entry, default_args, what = TEMPLATES[template]
        fn, example_args = _namespace_fn(source, entry), example_args or default_args
        description = description or what
    full = _specs(example_args, "--example-args")
    small = _specs(small_args, "--small-args") if small_args else small_specs(full)
    _check_runs(fn, full, "full")
    _check_runs(fn, small, "small")
    folder = parent / name
    if folder.exists() and any(folder.iterdir()) and not force:
        raise TaskError(f"{folder} exists and is not empty; pick another NAME or pass --force")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(source.rstrip() + "\n" + inputs_source(entry, full, small,
                                                                               count_flops(fn, full)))
    (folder / "kernel_task.yaml").write_text(yaml_text(name, description, tolerance(full)))
    _report(click.get_current_context(), folder, full, small)
    return 0


def _report(ctx: click.Context, folder: Path, full: list[ArgSpec], small: list[ArgSpec]) -> None:
    from maxkernel_core.cli.app import app_for

    task = app_for(ctx).backend("tpu_pallas").load_task(folder)  # the folder loads, or the error says why
    click.echo(f"Wrote {folder}/reference.py and kernel_task.yaml: task {task.id}, full size "
               f"{' '.join(s.text() for s in full)}, checked at {' '.join(s.text() for s in small)}, "
               f"atol = rtol = {task.atol}.")
    click.echo(f"Next: maxkernel run --task {folder} --provider offline   (docs/new-task.md explains the files)")
