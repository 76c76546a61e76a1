"""Lines of a generated module that every chip's row-wise and matmul templates write alike: a value's block
shape and index by its kind, its 2-D view, the output's shape in the reference's terms, and the last lines
(the reshape back, or the tail XLA runs on the kernel's per-row values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .analysis import Analysis


def spec_for(kind: str, rows: str, cols: str, index_rows: str, index_cols: str) -> str:
    shape = {"row": f"({rows}, {cols})", "col": f"(1, {cols})", "rowred": f"({rows}, 1)", "scalar": "(1, 1)"}[kind]
    index = {"row": f"({index_rows}, {index_cols})", "col": f"(0, {index_cols})", "rowred": f"({index_rows}, 0)",
             "scalar": "(0, 0)"}[kind]
    return shape, index


def view_of(kind: str, arg: str, d: str = "d") -> str:
    return {"row": f"{arg}.reshape(-1, {d})", "col": f"{arg}.reshape(1, -1)", "rowred": f"{arg}.reshape(-1, 1)",
            "scalar": f"{arg}.reshape(1, 1)"}[kind]


def output_shape_expr(a: Analysis, lead_arg: str) -> str:
    """The output shape in terms of the leading (row) input's shape at call time."""
    out = a.program.shapes[a.output]
    lead = a.program.shapes[a.program.inputs[0]] if a.template == "rowwise" else None
    kind = a.kinds[a.output]
    if kind == "row":
        return f"{lead_arg}.shape[:-1] + (d,)" if a.template == "rowwise" else "(m, n)"
    keep = len(out) >= 1 and out[-1] == 1 and (lead is None or len(out) == len(lead))
    if a.template == "rowwise":
        return f"{lead_arg}.shape[:-1] + (1,)" if keep else f"{lead_arg}.shape[:-1]"
    if out.count(1) == len(out) - 1 and a.rows in out:  # one value per row, in the reference's own rank
        dims = ["m" if size == a.rows else "1" for size in out]
        return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    return "(m, 1)" if keep else "(m,)"


def finish_lines(a: Analysis, lead_arg: str, arg_of: dict[str, str] | None = None) -> list[str]:
    """The computation's last lines: the kernel's output in the reference's shape, or the tail on it (``arg_of``:
    the module's names of the program inputs the tail reads)."""
    if a.tail_from is None:
        return [f"    return out.reshape({output_shape_expr(a, lead_arg)})"]
    from .scalar_tail import tail_lines

    lines, result = tail_lines(a.program.eqns[a.tail_from:], a.partial, inputs=arg_of)
    return [f"    partial = out.reshape({output_shape_expr(a, lead_arg)})  # one value per row",
            "    # the ops after the per-row values (a reduction over rows, a broadcast): left to XLA", *lines,
            f"    return {result}"]
