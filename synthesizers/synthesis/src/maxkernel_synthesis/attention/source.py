"""The parts of a generated attention module every chip's template shares: the operands' views in kernel
order (grid and unit axes first, the blocked axes last), the module's names, and the reference's own score
pipeline as a function of one (query block, key block) tile. The chips' templates write their kernels around
them (the TPU's ``maxkernel_tpu_offline.flash``, the GPU's ``maxkernel_gpu_offline.attention``).
"""

from __future__ import annotations

import re

from attrs import define

from .spec import AttentionSpec, Operand

#: the blocked axes each operand's view ends with, in order
TAILS = {"q": ("q", "d"), "k": ("k", "d"), "v": ("k", "e"), "out": ("q", "e"), "bias": ("q", "k")}


def kernel_dtype(dtype: str) -> str:
    return "int32" if dtype == "bool" else dtype


def jnp_name(dtype: str) -> str:
    return "jnp.bool_" if dtype == "bool" else f"jnp.{dtype}"


def kernel_view(op: Operand) -> tuple[list[int], list[tuple], bool]:
    """(axes of the array in kernel order, their roles, whether a unit q/k axis is appended for a bias).

    Grid and extent-1 axes lead in array order, then the two blocked axes; an array already in that order is
    not transposed (the index map may permute leading axes freely)."""
    lead = [i for i, r in enumerate(op.roles) if r[0] in ("grid", "one")]
    tail, roles, missing = [], [op.roles[i] for i in lead], False
    for name in TAILS[op.role]:
        where = [i for i, r in enumerate(op.roles) if r == (name,)]
        if where:
            tail.append(where[0])
            roles.append((name,))
        else:
            missing = True
            roles.append(("unit",))
    return lead + tail, roles, missing


def view_source(op: Operand, arg: str) -> tuple[str, bool]:
    perm, _, missing = kernel_view(op)
    text, moved = arg, perm != list(range(len(op.roles)))
    if moved:
        text = f"jnp.transpose({arg}, {tuple(perm)})"
    if missing:
        lead = [f"{arg}.shape[{i}]" for i, r in enumerate(op.roles) if r[0] in ("grid", "one")]
        dims = lead + [f"{arg}.shape[{next(i for i, r in enumerate(op.roles) if r == (n,))}]"
                       if (n,) in op.roles else "1" for n in TAILS[op.role]]
        text = f"{text}.reshape({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    if op.dtype == "bool":
        text = f"{text}.astype(jnp.int32)"
    return text, moved


@define
class Module:
    """What every part of the generated module needs: the spec, the argument names, the operands' layouts."""

    spec: AttentionSpec
    numbers: list[str]
    args: list[str]
    bnames: list[str]
    gnames: list[str]
    views: list[str]
    transposed: list[str]
    out_perm: list[int]
    out_dims: list[str]

    @property
    def ng(self) -> int:
        return len(self.spec.grid)

    @property
    def out_moved(self) -> bool:
        return self.out_perm != list(range(len(self.spec.operand("out").roles)))

    @property
    def clamp(self) -> bool:
        return bool(self.spec.skip and (self.spec.k_first or self.spec.k_last))

    def fill(self, text: str) -> str:
        return re.sub(r"\{c(\d+)\}", lambda m: self.numbers[int(m[1])], text)


def module_parts(spec: AttentionSpec, n_dynamic: int, numbers: list[str]) -> Module:
    args = [f"a{i}" for i in range(n_dynamic)]
    biases = spec.biases
    bnames = [f"b{i}" for i in range(len(biases))]
    views, transposed = [], []
    named = [("q", spec.operand("q")), ("k", spec.operand("k")), ("v", spec.operand("v")),
             *zip(bnames, biases, strict=True)]
    for name, op in named:
        text, moved = view_source(op, args[op.input])
        views.append(f"    {name} = {text}")
        if moved:
            transposed.append(name)
    out = spec.operand("out")
    out_perm, out_roles, _ = kernel_view(out)
    out_dims = [f"n{role[1]}" if role[0] == "grid" else {"one": "1", "q": "sq", "e": "ev"}[role[0]]
                for role in out_roles]
    if out_perm != list(range(len(out.roles))):
        transposed.append("the output")
    return Module(spec, numbers, args, bnames, [f"n{g}" for g in range(len(spec.grid))], views, transposed,
                   out_perm, out_dims)


def scores_source(m: Module) -> list[str]:
    score_args = ["s", "qpos", "kpos", *[f"g{g}" for g in range(m.ng)], *m.bnames]
    return [f"def _scores({', '.join(score_args)}, *, masked, sq, sk, hd, ev):",
            "    \"\"\"The reference's score pipeline on one (query block, key block) tile of q·kᵀ.\"\"\"",
            *[f"    {m.fill(line)}" for line in m.spec.score_lines], "", ""]
