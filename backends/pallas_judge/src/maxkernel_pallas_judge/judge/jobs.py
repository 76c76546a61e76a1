"""The reference job: the task's own code, trusted, in a worker of its own (one per reference job).

It traces the reference at full size and at each check size, counts its work
by the same rule the checker applies to a candidate's program (``hlo_work``
on the exported device program), compiles it for the target (XLA's figures),
makes the input sets and the expected outputs, and on a host with the chip
times it. What is chip-specific comes from the backend's ``Platform``.
The candidate's jobs are ``trace_job.py`` (its sandbox) and ``check_job.py``
(the checker's).
"""

from __future__ import annotations

import hashlib
from typing import Any
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import inputs as task_inputs
from .hlo_work import program_work
from .job_records import ReferenceJob
from .platform import Platform, load_platform
from .task_module import load_task_module
from .work import work_stats

Emit = Callable[..., None]


def _flat(outputs: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(outputs)]


def _trace(fn, shapes, static):
    return jax.make_jaxpr(lambda *d: fn(*d, *static))(*shapes)


def program_work_of(closed, target: str, platform: Platform, owned_scope: str = "") -> dict[str, Any]:
    """The reference's work in this traced program, counted as the checker counts a candidate's program
    (with the work inside ``owned_scope``, the task's ``kernel_owns``, counted apart)."""
    try:
        text = jax.export.deserialize(bytearray(platform.export(closed, target))).mlir_module()
        work = program_work(text, owned_scope or None, platform=platform)
    except Exception as exc:  # a reference XLA cannot export: its traced counts stand in (same FLOP rule)
        if owned_scope:
            raise ValueError(f"kernel_owns {owned_scope!r} needs the reference's exported program, and exporting "
                             f"it failed: {type(exc).__name__}: {exc}") from exc
        stats = work_stats(closed)
        return {"glue_flops": stats["glue_flops"], "glue_elementwise": stats["glue_elementwise"],
                "note": f"counted from the jaxpr: export failed ({type(exc).__name__})"}
    if owned_scope and not work["owned_flops"] and not work["owned_elementwise"]:
        raise ValueError(f"kernel_owns {owned_scope!r}: the reference does no work inside "
                         f"jax.named_scope({owned_scope!r}); wrap the operation the kernel must own in it")
    return work


def check_sizes(sets: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The distinct input signatures of the sets (what the tracer traces), and each set's index among them."""
    sizes: list[dict[str, Any]] = []
    keys: list[str] = []
    which = []
    for s in sets:
        spec = {"shapes": [{"shape": list(np.shape(a)), "dtype": np.asarray(a).dtype.name} for a in s["dynamic"]],
                "static": task_inputs.encode_static(s["static"])}
        key = repr(spec)
        if key not in keys:
            keys.append(key)
            sizes.append(spec)
        which.append(keys.index(key) + 1)  # 0 is the full size
    return sizes, which


def _check_inputs(module, meta, job, shapes, out_avals) -> tuple[list[dict[str, Any]], Any, str]:
    """(input sets, the module they are checked with, a note on their size) for the CPU checks. A task without
    its own small size is checked at full size while one call's inputs and outputs are at most the CPU limit
    (64 K-wide rows make a 4 GiB product of 16 MiB of inputs); above it, at a derived small size; with none,
    not at all on the CPU (unverified, where no chip checks the full size)."""
    from .small_size import SMALL_SET_BYTES, derive, set_bytes

    full_bytes = set_bytes(shapes) + set_bytes(out_avals)
    if job.size != "full" or full_bytes <= job.max_full_input_bytes:
        at = "at the task's small size" if job.size == "small" else "at full size"
        return task_inputs.input_sets(module, meta, fresh=job.fresh, size=job.size), module, at
    small, how = derive(meta, full_bytes, job.small_set_bytes or SMALL_SET_BYTES)
    too_big = (f"the task has no small size and one full-size call's inputs and outputs ({full_bytes / 2**20:.0f} "
               f"MiB) are over the {job.max_full_input_bytes / 2**20:.0f} MiB a CPU correctness run takes")
    if small is None:
        return [], module, f"{too_big}, and no small size could be derived: {how}"
    return task_inputs.input_sets(small, meta, fresh=job.fresh, size="full"), small, f"at {how}"


def check_translation(module, sets: list[dict[str, Any]], expected: list[list[np.ndarray]], atol, rtol) -> None:
    """A PyTorch task's JAX reference (torchax) against PyTorch's own output on the first set: a wrong
    translation must stop the task before any kernel is judged against it."""
    from .compare import compare

    if not sets:
        return
    torch_out = module._mk_torch_outputs(*sets[0]["dynamic"], *sets[0]["static"])
    ok, why, _ = compare([np.asarray(o, dtype=e.dtype) for o, e in zip(torch_out, expected[0], strict=False)],
                         expected[0], atol, rtol)
    if not ok or len(torch_out) != len(expected[0]):  # the zip stops at the shorter list: count them too
        raise ValueError(f"the reference's JAX translation (torchax) differs from PyTorch's own output on CPU: "
                         f"{why or 'a different number of outputs'}")


def run_reference(job: ReferenceJob, arrays: list[np.ndarray], emit: Emit, stage: Callable[[str], None]) -> None:
    meta = job.task
    platform = load_platform(job.platform)
    stage("import reference")
    module = load_task_module(meta, "maxkernel_reference_task")
    fn = getattr(module, meta["entry"])
    stage("full-size shapes")
    shapes, static_full = task_inputs.abstract_full(module, meta)
    stage("trace reference")
    traced_full = _trace(fn, shapes, static_full)
    work = work_stats(traced_full)
    flops = float(module.get_flops()) if meta.get("has_flops") else None
    stage("input sets")
    sets, check_module, note = _check_inputs(module, meta, job, shapes, traced_full.out_avals)
    check_fn = getattr(check_module, meta["entry"])
    expected = []
    for i, s in enumerate(sets):
        stage(f"reference outputs, set {i}")
        # The expected values are the exact math: on a TPU, float32 matmuls default to one bf16
        # pass, and a kernel that really computes in float32 must not be judged against that.
        with jax.default_matmul_precision("highest"):
            expected.append(_flat(jax.jit(lambda *d, _s=s["static"]: check_fn(*d, *_s))(*s["dynamic"])))
    if meta.get("wrap") == "pytorch":
        stage("the torchax translation against PyTorch")
        check_translation(check_module, sets, expected, job.atol, job.rtol)
    stage("the precision the reference needs")
    precision = platform.reference_precision(check_fn, sets, expected, job.atol, job.rtol)
    stage("compile reference for the target")
    # XLA's program as a user's jax.jit runs it, at the default matmul precision: the program the chip measures
    # (an f32 matmul in one bf16 pass there, 190 TFLOP/s on the lent v5e). Charging it the precision the task's
    # tolerance needs (three passes) called a kernel measured at 0.82x XLA "2.20x faster".
    xla = platform.compile_reference(lambda *d: fn(*d, *static_full), shapes, job.target, meta["module"],
                                     timeout_s=job.compile_timeout_s, precision="default")
    xla["chip"] = platform.chip(job.target)  # past the time limit above, the compile's figures are given up
    xla["precision"] = {**precision, "estimated_at": "default"}
    stage("reference work, as the checker counts it")
    sizes, set_sizes = check_sizes(sets)
    owns = meta.get("kernel_owns", "")
    works = [program_work_of(traced_full, job.target, platform, owns)]
    for spec in sizes:
        small = [jax.ShapeDtypeStruct(tuple(a["shape"]), a["dtype"]) for a in spec["shapes"]]
        traced = _trace(check_fn, small, task_inputs.decode_static(spec["static"]))
        works.append(program_work_of(traced, job.target, platform, owns))
    emit({
        "type": "reference",
        "full_shapes": [{"shape": list(s.shape), "dtype": s.dtype.name} for s in shapes],
        # the operator's fingerprint (its full-size program, shapes and dtypes in it): the tuned table's key
        "signature": hashlib.sha256(str(traced_full.jaxpr).encode()).hexdigest()[:32],
        "static_full": task_inputs.encode_static(static_full),
        "work": work,
        "program_work": works,
        "check_sizes": sizes,
        "flops": flops,
        "xla": xla,
        "sets": len(sets),
        "note": note,
        "derived": check_module is not module,  # checked at a size the judge derived, not the task's own
        "platform": jax.default_backend(),
    })
    for i, (s, outputs) in enumerate(zip(sets, expected, strict=True)):
        dyn = [np.asarray(a) for a in s["dynamic"]]
        stage(f"the widened reference where set {i}'s outputs are not finite")
        wide = _wide_outputs(check_fn, s, outputs)
        emit({"type": "reference_set", "index": i, "how": s["how"], "static": task_inputs.encode_static(s["static"]),
              "n_inputs": len(dyn), "n_outputs": len(outputs), "size": set_sizes[i]}, dyn + outputs + wide)
    if job.device:
        _device_payload(fn, module, meta, shapes, static_full, job.target, platform, emit, stage)


def widened(fn, shapes, static) -> Callable[..., list[Any]]:
    """``fn`` on its inputs with every floating-point input narrower than float32 widened to float32, its outputs
    (leaves) rounded once to the dtypes ``fn`` itself returns: the best answer those dtypes can hold."""
    dtypes = [o.dtype for o in jax.tree_util.tree_leaves(jax.eval_shape(lambda *d: fn(*d, *static), *shapes))]

    def wide_fn(*d):
        wide = [x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype.itemsize < 4 else x
                for x in d]
        out = jax.tree_util.tree_leaves(fn(*wide, *static))
        return [o.astype(t) for o, t in zip(out, dtypes, strict=True)]

    return wide_fn


def _wide_outputs(check_fn, s: dict[str, Any], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """Where the reference's outputs for a set hold NaN or Inf, the same set through the reference widened to
    float32 at the highest precision (``widened``): the arbiter when a kernel is finite where the reference is
    not (bf16 softmax or GroupNorm after a GEMM overflows in the reference, not in a kernel that accumulates in
    f32). Empty where every output is finite, or the reference cannot run widened."""
    if all(np.isfinite(o.astype(np.float64)).all() for o in outputs if jnp.issubdtype(o.dtype, jnp.inexact)):
        return []  # jnp's issubdtype knows bfloat16 is floating; numpy's does not
    shapes = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in s["dynamic"]]
    try:
        with jax.default_matmul_precision("highest"):
            return _flat(jax.jit(widened(check_fn, shapes, s["static"]))(*s["dynamic"]))
    except Exception:  # noqa: BLE001  a reference written for its own dtype: no arbiter
        return []


def _arbiter(fn, shapes, static, target: str, platform: Platform) -> bytes:
    """The reference in float32 at the highest matmul precision, on the task's own inputs (its floating-point
    inputs widened inside the program): the arbiter the chip's outputs are held against. A bf16 program asked for
    the highest precision alone is the same bf16 program (and libtpu refused 1p's: "Bad lhs type"); a reference
    that cannot run widened is exported at the highest precision as it is. Its outputs are flat (leaves)."""

    with jax.default_matmul_precision("highest"):
        try:
            return platform.export(jax.make_jaxpr(widened(fn, shapes, static))(*shapes), target)
        except Exception:  # noqa: BLE001  a reference written for its own dtype
            return platform.export(_trace(fn, shapes, static), target)


def _device_payload(fn, module, meta, shapes, static_full, target: str, platform: Platform, emit: Emit,
                    stage: Callable[[str], None]) -> None:
    """What the device worker needs to hold the reference on the chip, made here on the CPU: the task's full-size
    inputs, XLA's program of the reference as a user's ``jax.jit`` runs it, and the same program at the highest
    matmul precision (the arbiter when a kernel and XLA disagree). (Each candidate is also checked on a set the
    device worker draws for it alone: ``device_job._fresh_set``.) A failure here costs the measurement, never
    the task: it is reported, and the task is judged as on a host without the chip."""
    stage("the reference's programs for the chip")
    try:
        (own, _static), *_ = task_inputs.call_inputs(module, meta, size="full", seed=None)
        xla = platform.export(_trace(fn, shapes, static_full), target)
        exact = _arbiter(fn, shapes, static_full, target, platform)
    except Exception as exc:  # e.g. inputs over this worker's memory limit
        emit({"type": "device_payload_error", "message": f"{type(exc).__name__}: {exc}"[:500]})
        return
    blobs = [np.frombuffer(b, dtype=np.uint8) for b in (xla, exact)]
    emit({"type": "device_payload", "n_inputs": len(own)}, [*(np.asarray(a) for a in own), *blobs])
