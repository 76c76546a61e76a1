"""Public measurements as points the model can predict: each rebuilt program described, with its measured time.

A point holds what the model needs and nothing it could fit to by accident:
the kernels' descriptions (``extract.py``), the code around them (the
deviceless compile's ops, ``hlo_program.py``) or the whole XLA program, the
measured seconds, and the facts of how it was measured that the model cannot
know (``dispatch``: a wall-clock timing that includes Python dispatch;
``scheduler``: a kernel compiled with Mosaic's experimental scheduler). Building
points traces and compiles (seconds each); ``build_points`` caches them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data"


def load_data(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.json").read_text())


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    dtype, dims = re.fullmatch(r"(\w+)\[([\d,]*)\]", text).groups()
    return {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}.get(dtype, dtype), tuple(
        int(d) for d in dims.split(",") if d)


def sds(text: str):
    import jax

    dtype, shape = _shape(text)
    return jax.ShapeDtypeStruct(shape, dtype)


def compiled_program(fn, shapes, target: str) -> tuple[str, dict[str, float]]:
    """XLA's optimized program for ``target`` (a deviceless compile through libtpu), and its cost analysis."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from ...platform.compile import device_jit, target_device

    device = target_device(target)
    sharding = SingleDeviceSharding(device)
    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in shapes]
    with jax.default_device(device):
        compiled = device_jit(fn, args, sharding).lower(*args).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) and cost else cost
    return compiled.as_text(), {k: float(v) for k, v in (cost or {}).items() if isinstance(v, (int, float))}


def describe(fn, shapes, target: str, *, kernels: bool = True) -> dict[str, Any]:
    """The kernels of ``fn`` (from its trace) and the rest of its compiled program (``glue``), or, for a program
    with no kernel of its own, the whole compiled program (``program``)."""
    import jax

    from maxkernel_pallas_judge.profiling.extract import describe_kernels
    from ..hlo_program import describe_program

    text, cost = compiled_program(fn, shapes, target)
    if not kernels:
        return {"kernels": [], "glue": None, "program": describe_program(text),
                "xla_optimal_s": cost.get("optimal_seconds")}
    return {"kernels": describe_kernels(jax.make_jaxpr(fn)(*shapes)),
            "glue": describe_program(text, skip_kernels=True), "program": None}


def _point(source: str, ident: str, target: str, seconds: float, described: dict[str, Any], **facts) -> dict:
    return {"source": source, "id": ident, "target": target, "measured_s": seconds, **described,
            "dispatch": False, "scheduler": False, **facts}


def matmul_guide_points() -> list[dict[str, Any]]:
    import jax

    from .programs import tiled_matmul

    data = load_data("pallas_matmul_guide_v5e")
    points = []
    for p in data["points"]:
        m, k, n = p["m"], p["k"], p["n"]
        x = jax.ShapeDtypeStruct((m, k), "bfloat16")
        if p["kernel"] == "xla_matmul":
            y = jax.ShapeDtypeStruct((k, n), "bfloat16")
            described = describe(lambda a, b: a @ b, [x, y], "v5e", kernels=False)
            ident = f"xla {m}x{k}x{n}"
        else:
            transpose = p["variant"] == "transpose_rhs"
            y = jax.ShapeDtypeStruct((n, k) if transpose else (k, n), "bfloat16")
            act = jax.nn.relu if p["variant"] == "relu" else None
            fn = tiled_matmul(p["bm"], p["bk"], p["bn"], transpose_rhs=transpose, activation=act)
            described = describe(fn, [x, y], "v5e")
            ident = f"{p['variant']} {m}^3 blocks {p['bm']}x{p['bk']}x{p['bn']}"
        points.append(_point(data["name"], ident, "v5e", p["seconds"], described, dispatch=True, cls="gemm"))
    return points


def splash_points() -> list[dict[str, Any]]:
    from .programs import splash_attention

    data = load_data("tokamax_flash_attention_v6e")
    points = []
    for p in data["points"]:
        q, k, v = (sds(p[x]) for x in ("q", "k", "v"))
        b, t, h, d = q.shape
        fn = splash_attention(heads=h, seq_q=t, seq_kv=k.shape[1], causal=p["causal"], block_q=p["block_q"],
                              block_kv=p["block_kv"], block_kv_compute=p["block_kv_compute"],
                              layouts=(p["q_layout"], p["k_layout"], p["v_layout"]),
                              save_residuals=p["return_residuals"], scale=p["logits_scale"])
        ident = (f"{p['q']} {'causal' if p['causal'] else 'full'}{' +res' if p['return_residuals'] else ''} "
                 f"{p['block_q']}/{p['block_kv']}/{p['block_kv_compute']}")
        points.append(_point(data["name"], ident, "v6e", p["seconds"], describe(fn, [q, k, v], "v6e"),
                             scheduler=bool(p["use_experimental_scheduler"]), cls="attention"))
    return points


def ragged_dot_points() -> list[dict[str, Any]]:
    from .programs import megablox

    data = load_data("tokamax_ragged_dot_v5e")
    points = []
    for p in data["points"]:
        if p["input_buffer_count"] != 2 or p["return_residuals"]:
            continue  # jax's megablox has no deeper input buffering; residuals are another kernel
        lhs, rhs = sds(p["lhs"]), sds(p["rhs"])
        dims = p["dot_dimension_numbers"][0]
        tiling = (p["tile_m"], p["tile_k"], p["tile_n"])
        transposed = dims == [[0], [0]]
        fn = megablox(np.asarray(p["group_sizes"]), tiling, transpose_rhs=dims == [[1], [2]], transposed=transposed)
        ident = f"{'tgmm' if transposed else 'gmm'} {p['lhs']} x {p['rhs']} tiles {tiling}"
        points.append(_point(data["name"], ident, "v5e", p["seconds"], describe(fn, [lhs, rhs], "v5e"),
                             cls="ragged"))
    return points


BUILDERS = {"pallas_matmul_guide_v5e": matmul_guide_points, "tokamax_flash_attention_v6e": splash_points,
            "tokamax_ragged_dot_v5e": ragged_dot_points}


def cached(path: Path, build) -> list[dict[str, Any]]:
    """Points from ``path`` if a previous build left them there, else ``build()``'s, saved there."""
    if path.is_file():
        return json.loads(path.read_text())
    points = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(points, default=str))
    return points


def build_points(sources: list[str], cache: Path | None = None, log=print) -> list[dict[str, Any]]:
    """Every point of ``sources`` (data file names), from ``cache`` when a previous build left them there."""
    points = []
    for source in sources:
        path = cache / f"{source}.json" if cache else None
        if path and path.is_file():
            points += json.loads(path.read_text())
            continue
        log(f"building {source} (traces and deviceless compiles)...")
        built = BUILDERS[source]()
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(built, default=str))
        points += built
    return points
