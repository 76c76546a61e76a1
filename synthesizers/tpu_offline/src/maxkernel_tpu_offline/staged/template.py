"""The staged template: every matmul and convolution on a Pallas kernel, the rest of the program left to XLA.

The last resort after the fused templates and the batch fallback: for
computations with several matmuls (SwiGLU, MoE, MLA with its projections,
Mamba-2's chunked scan), grouped matmuls (``lax.ragged_dot``, or a loop over groups
that is one: one grouped kernel, staged_grouped.py), statistics that cross rows after a GEMM (BatchNorm
over the batch, GroupNorm, a max over the batch) and convolutions (the direct,
few-channel or im2col kernels of staged_conv.py and staged_planar.py).
The candidate runs the reference's own program through the interpreter of
``staged_runtime.py``; only the matmul and convolution equations change, so
the result is exact by construction (an attention's softmax, run as the flash
kernel's f32 online softmax, is exact to the tolerance), and the judge's proof of kernel decides
whether enough of the work is in the kernels. It is declined here when it
could not be: when the arithmetic outside the matmuls is over
``MAX_GLUE_SHARE`` of the whole (a margin under the judge's own bound), or when a matmul
has no kernel lowering (a ``ragged_dot_general`` in another form than ``lax.ragged_dot``'s).
"""

from __future__ import annotations

import ast
import collections
import inspect
import math
import re
import textwrap

from maxkernel_core import pyast
from maxkernel_synthesis.analysis import Analysis
from maxkernel_synthesis.ir import Declined, Program
from maxkernel_tpu_pallas.api import MAX_GLUE_WORK_SHARE

from ..blocks import block_helper_source, itemsize
from . import attention as staged_attention
from . import attention_match as staged_attention_match
from . import conv as staged_conv
from . import epilogue as staged_epilogue
from . import grouped as staged_grouped
from . import grouped_match as staged_grouped_match
from . import matmul as staged_matmul
from . import paged as staged_paged
from . import planar as staged_planar
from . import runtime as staged_runtime
from .spec import Matmul, StagedSpec

#: Decline when more than this share of the arithmetic would run outside the kernels: four fifths of the
#: judge's bound (the offline count is the reference's; a margin keeps a kernel's extra glue inside it).
MAX_GLUE_SHARE = MAX_GLUE_WORK_SHARE * 4 / 5
MARKER = "# --- the staged runtime (pasted into candidates from here on) ---"


def _matmuls(jaxpr, repeat: int, out: list[Matmul], consts=()) -> None:
    """Every matmul and convolution of ``jaxpr`` as the kernels will run it, loops' bodies per trip; calls are
    inlined first, as the runtime inlines them, so the tails it fuses are the ones found here."""
    from jax.extend import core as jex_core

    jaxpr, consts = _inlined(jaxpr, consts)
    repeats = staged_runtime._repeats(jaxpr)
    tails = _convolution_tails(jaxpr)
    grouped = staged_grouped_match._grouped_scans(jaxpr)
    for index, eqn in enumerate(jaxpr.eqns):
        name = eqn.primitive.name
        if index in grouped:  # one grouped kernel for the whole loop, its body not run
            out.append(_grouped_matmul(grouped[index].lhs, grouped[index].rhs, eqn, repeat, "grouped matmul"))
            continue
        if name == "ragged_dot_general":
            if not staged_grouped_match._plain_ragged(eqn):
                raise Declined("a ragged_dot_general other than lax.ragged_dot's (M, K) x (G, K, N) form has no "
                               "kernel lowering here (the grouped kernel takes that form only)")
            if not all("float" in str(v.aval.dtype) for v in eqn.invars[:2]):
                raise Declined("an integer ragged_dot has no kernel lowering here")
            out.append(_grouped_matmul(eqn.invars[0], eqn.invars[1], eqn, repeat, "ragged_dot"))
        if name == "dot_general":
            out.append(_dot_matmul(eqn, repeat, staged_runtime._fold_of(eqn, repeats)))
        elif name == "conv_general_dilated":
            out.append(_conv_matmul(eqn, repeat, *tails.get(index, (None, False, False))))
        length = int(eqn.params.get("length", 1)) if name == "scan" else 1
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(item, jex_core.ClosedJaxpr):
                    _matmuls(item.jaxpr, repeat * length, out, item.consts)
                elif isinstance(item, jex_core.Jaxpr):
                    _matmuls(item, repeat * length, out)


def _grouped_matmul(lhs, rhs, eqn, repeat: int, source: str) -> Matmul:
    """The grouped kernel (staged_grouped) of lhs (M, K) by rhs (G, K, N), writing ``eqn``'s output dtype: a
    ``ragged_dot``, or a loop over groups (staged_grouped_match._GroupedScan)."""
    (m, k), (g, _, n) = lhs.aval.shape, rhs.aval.shape
    return Matmul(1, m, n, k, str(lhs.aval.dtype), repeat, source, out_dtype=str(eqn.outvars[0].aval.dtype),
                  groups=g)


def _inlined(jaxpr, consts):
    """The jaxpr with its calls inlined (staged_epilogue._flattened), traced at its inputs' shapes."""
    import jax

    args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in jaxpr.invars]
    return staged_epilogue._flattened(jaxpr, list(consts), args)


def _convolution_tails(jaxpr) -> dict[int, tuple[str, bool, bool]]:
    """{index of a convolution with a fused tail: (the dtype the tail ends in, whether it transposes the output
    to NCHW: staged_epilogue._channels_first, whether it ends in a spatial sum: _spatial_sum)}."""
    return {i: (str(jaxpr.eqns[tail[-1]].outvars[0].aval.dtype), staged_epilogue._transposes(jaxpr, tail),
                staged_epilogue._reduces(jaxpr, tail))
            for i, tail, _ in staged_epilogue._epilogue_plan(jaxpr).values()
            if jaxpr.eqns[i].primitive.name == "conv_general_dilated"}


def _dot_matmul(eqn, repeat: int, fold=None) -> Matmul:
    """The kernel's (B, M, K) @ (B, K, N) as staged_matmul runs the dot_general: a folded repeat's group moves
    from B to the other operand's rows (or columns), and a narrow N is swapped onto the rows."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (v.aval for v in eqn.invars)
    if not all("float" in str(a.dtype) for a in (lhs, rhs)):
        raise Declined(f"an integer matmul ({lhs.dtype} x {rhs.dtype}) has no kernel lowering here")

    def size(a, dims):
        return math.prod(a.shape[d] for d in dims)

    lf, rf = staged_matmul._free_dims(lhs, lc, lb), staged_matmul._free_dims(rhs, rc, rb)
    b, m, n = size(lhs, lb), size(lhs, lf), size(rhs, rf)
    if fold is not None:
        g = fold[2]
        b, m, n = (b // g, m * g, n) if fold[0] == 1 else (b // g, m, n * g)
    if staged_matmul._swaps(lhs, rhs, eqn.params["dimension_numbers"]):
        m, n = n, m
    return Matmul(b, m, n, size(lhs, lc), str(lhs.dtype), repeat, out_dtype=str(eqn.outvars[0].aval.dtype))


def _plain_shape(eqn) -> tuple[int, tuple[int, ...], int, tuple[int, ...], int, int] | None:
    """(N, padded spatial dims, C, window, O, itemsize) of a stride-1, undilated, ungrouped 2-D or 3-D
    convolution, the kinds the direct and the few-channel kernels take; else None."""
    lhs, rhs = (v.aval for v in eqn.invars)
    lhs_spec, rhs_spec, _ = eqn.params["dimension_numbers"]
    p = eqn.params
    if (len(lhs_spec) not in (4, 5) or set(p["window_strides"]) != {1} or set(p["rhs_dilation"]) != {1}
            or set(p["lhs_dilation"]) != {1} or p["feature_group_count"] != 1):
        return None
    spatial = tuple(lhs.shape[d] + lo + hi for d, (lo, hi) in zip(lhs_spec[2:], p["padding"], strict=True))
    window = tuple(rhs.shape[d] for d in rhs_spec[2:])
    item = max(itemsize(str(lhs.dtype)), itemsize(str(rhs.dtype)))
    return lhs.shape[lhs_spec[0]], spatial, lhs.shape[lhs_spec[1]], window, rhs.shape[rhs_spec[0]], item


def _conv_matmul(eqn, repeat: int, tail_dtype: str | None = None, transposes: bool = False,
                 reduces: bool = False) -> Matmul:
    """A convolution as the runtime runs it: on the few-channel kernel (channels first, the whole tail, ending
    in ``tail_dtype``, fused, and a closing spatial sum, if it ``reduces``, too), on the direct kernel (taps
    accumulated from VMEM rows, stored channels first when its tail ``transposes`` it to NCHW and the kernel
    can; a tail that sums runs after it), else as the im2col matmul: patches (positions x taps*channels) @
    weights."""
    if eqn.params.get("batch_group_count", 1) != 1:
        raise Declined("a convolution with batch_group_count > 1 (a weight gradient) has no im2col lowering")
    lhs, rhs = (v.aval for v in eqn.invars)
    res = eqn.outvars[0].aval
    plain = _plain_shape(eqn)
    if plain is not None:
        n, spatial, c, window, o, item = plain
        positions = math.prod(s - k + 1 for s, k in zip(spatial, window, strict=True))
        out_dtype = tail_dtype or str(res.dtype)
        if staged_planar._planar_conv_takes(spatial, c, window, o, item, itemsize(out_dtype), reduces):
            k = staged_planar._planar_geometry(spatial, c, window, o)["k"]
            return Matmul(n, positions, o, k, str(lhs.dtype), repeat, "conv_general_dilated", out_dtype,
                          direct=(n, spatial, c, window, o), planar=True, reduces=reduces)
        if staged_conv._direct_conv_takes(spatial, c, window, item):
            first = (transposes and not reduces
                     and staged_conv._channels_first_takes(spatial, c, window, o, item, itemsize(out_dtype)))
            return Matmul(n, positions, o, math.prod(window) * c, str(lhs.dtype), repeat, "conv_general_dilated",
                          out_dtype if first else str(res.dtype), direct=(n, spatial, c, window, o),
                          channels_first=first)
    _, rhs_spec, out_spec = eqn.params["dimension_numbers"]
    groups = eqn.params["feature_group_count"]
    taps = math.prod(rhs.shape[d] for d in rhs_spec[2:])
    batch, out_sp = res.shape[out_spec[0]], [res.shape[d] for d in out_spec[2:]]
    dilation = (1,) * len(out_sp)  # a transposed convolution runs as one convolution per output residue class
    if (max(eqn.params["lhs_dilation"]) > 1 and set(eqn.params["window_strides"]) == {1}
            and set(eqn.params["rhs_dilation"]) == {1}):
        dilation = eqn.params["lhs_dilation"]
    classes, class_sp = math.prod(dilation), [-(-o // s) for o, s in zip(out_sp, dilation, strict=True)]
    k = max(taps // classes, 1) * rhs.shape[rhs_spec[1]]
    patches = batch * math.prod(out_sp) // classes * k * itemsize(str(lhs.dtype))
    chunks = next((d for d in range(1, batch + 1) if batch % d == 0
                   and patches // d <= staged_conv.PATCH_BYTES), batch)  # as the runtime splits the batch
    # the runtime computes the last dim's outputs up to a whole sublane tile
    positions = batch * math.prod(class_sp[:-1]) * staged_conv._sublane_width(class_sp[-1])
    return Matmul(groups * classes, positions // chunks, rhs.shape[rhs_spec[0]] // groups,
                  k, str(lhs.dtype), repeat * chunks, "conv_general_dilated", str(res.dtype))


def analyse_staged(closed) -> StagedSpec:
    """The matmuls the kernels will run and the share of the arithmetic left outside them, or Declined."""
    from maxkernel_tpu_pallas.api import work_stats

    matmuls: list[Matmul] = []
    _matmuls(closed.jaxpr, 1, matmuls)
    if not matmuls:
        raise Declined("no matmul or convolution: the staged template has nothing to put on a kernel")
    stats = work_stats(closed)
    flops, rest = stats["glue_flops"], stats["glue_elementwise"]
    share = rest / max(flops + rest, 1)
    if share > MAX_GLUE_SHARE:
        ops = ", ".join(sorted(stats["glue_ops"], key=lambda k: -stats["glue_ops"][k])[:5])
        raise Declined(f"{share:.0%} of the arithmetic is outside the matmuls ({ops}); staged kernels would leave "
                       f"it all to XLA (at most {MAX_GLUE_SHARE:.0%} is)")
    left = {k: v for k, v in stats["glue_ops"].items()
            if k not in ("dot_general", "ragged_dot_general", "conv_general_dilated")}
    return StagedSpec(matmuls, share, left, flops)


def analyse_staged_program(program: Program, why_not_fused: str) -> Analysis:
    """The staged template's analysis of a program no fused template takes (``Declined`` when it cannot be)."""
    if program.closed is None:
        raise Declined("the reference was not traced whole")
    spec = analyse_staged(program.closed)
    return Analysis("staged", program, 0, 0, {}, staged=spec,
                    why=f"no fused template fits ({why_not_fused}); {len(spec.matmuls)} matmul/convolution kernel(s) "
                        f"do {1 - spec.glue_share:.0%} of the arithmetic")


def last_resort(program: Program, why_not_fused: str) -> Analysis:
    """The TPU's last resort for the chip-neutral analysis (``maxkernel_synthesis.analysis.LastResort``)."""
    try:
        return analyse_staged_program(program, why_not_fused)
    except Declined as exc:
        raise Declined(f"no staged kernels: {exc}") from None


def _runtime_source() -> str:
    """The runtime's modules below their markers, as one block of source."""
    modules = (staged_matmul, staged_planar, staged_conv, staged_epilogue, staged_attention_match, staged_paged,
               staged_attention, staged_grouped, staged_grouped_match, staged_runtime)
    return "\n\n\n".join(inspect.getsource(module).split(MARKER, 1)[1].strip() for module in modules)


def _check_names(reference_source: str) -> None:
    """The reference is pasted next to the runtime: a top-level name of both would break one of them."""
    def top_level(source: str) -> set[str]:
        tree = pyast.parse(source)
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        return names | {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                        if isinstance(t, ast.Name)}

    runtime = top_level(_runtime_source()) | {"BLOCK_M", "BLOCK_N", "BLOCK_K", "VMEM_LIMIT_BYTES", "_block",
                                              "_reference"}
    clash = sorted(top_level(reference_source) & runtime)
    if clash:
        raise Declined(f"the reference defines {', '.join(clash)}, a name the staged runtime uses")


def _conv_kernels(convs: list[Matmul]) -> str:
    """How the convolutions run, for the candidate's docstring: "1 on the few-channel kernel, 2 through im2col"."""
    ways = collections.Counter("on the few-channel kernel" if mm.planar else "on the direct kernel" if mm.direct
                               else "through im2col" for mm in convs)
    return ", ".join(f"{count} {way}" for way, count in ways.items())


def module_source(spec: StagedSpec, task_id: str, params: dict[str, int], reference_source: str, entry: str,
                  n_dynamic: int, header: str) -> str:
    _check_names(reference_source)
    renamed = re.sub(rf"^def {entry}\(", "def _reference(", reference_source, flags=re.M)
    args = [f"a{i}" for i in range(n_dynamic)]
    convs = [mm for mm in spec.matmuls if mm.source == "conv_general_dilated"]
    grouped = sum(1 for mm in spec.matmuls if mm.groups)
    plain = len(spec.matmuls) - len(convs) - grouped
    what = " and ".join(part for part in (
        f"{plain} matmul(s)" if plain else "", f"{grouped} grouped matmul(s) (one kernel each)" if grouped else "",
        f"{len(convs)} convolution(s) ({_conv_kernels(convs)})" if convs else "") if part)
    left = ", ".join(sorted(spec.ops_left, key=lambda k: -spec.ops_left[k])[:8]) or "nothing"
    return "\n".join([
        header.format(
            title=f"Pallas matmul kernels for every matmul and convolution of {task_id}; the rest left to XLA.",
            template="staged", task_id=task_id,
            why=textwrap.fill(
                f"Why: no fused template fits, so the reference's own program runs with its {what} on Pallas "
                f"kernels (matmuls tiled, f32 accumulator in VMEM, K innermost). The other ops ({left}; "
                f"{spec.glue_share:.1%} of the arithmetic) are bound as the reference binds them, for XLA to "
                "fuse around the kernels: exact by construction, but each matmul output makes one HBM round "
                "trip that a fused epilogue would save.", 100),
            params=params, constants="\n".join(f"{k} = {v}" for k, v in params.items()),
            block_helper=block_helper_source()
        ).replace("import functools\n", "import functools\nimport itertools\nimport math\nimport typing\n", 1
        ).replace("import jax.numpy as jnp\n", "import jax.numpy as jnp\nimport numpy as np\nfrom jax import lax\n", 1).rstrip(), "", "",
        _runtime_source(), "", "",
        "# --- the reference computation (from the task's reference.py), run with its matmuls on the kernel ---",
        renamed.strip(), "# --- end of the reference ---", "", "",
        f"def computation({', '.join(args)}, *static):",
        f"    return _with_kernels(_reference, {n_dynamic})({', '.join(args)}, *static)", ""])
