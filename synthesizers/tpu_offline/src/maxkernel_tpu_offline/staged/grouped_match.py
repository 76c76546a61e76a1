"""Finding a grouped matmul written as a loop over groups, for the kernel of staged_grouped.py; copied verbatim
into every staged candidate below the marker.

The form (11p's reference, a grouped matmul without ``ragged_dot``) is a
``scan`` over ``i = 0 .. G-1`` (its ``xs`` an iota) whose one carry ``out``
starts as zeros and whose body is, by equation,

    s = starts[i]                                  starts: the exclusive cumsum of sizes
    p = dot(dynamic_slice(lhs, (s, 0), (W, K)),    a window of W rows at the group's start
            rhs[i])                                 the group's (K, N) weights
    q = where(iota rows < sizes[i], p, 0)          the group's rows of the window
    out = dynamic_update_slice(out, dynamic_slice(out, (s, 0), (W, N)) + q.astype(out.dtype), (s, 0))

(jnp's wrap of a negative index, ``select(s < 0, s + n, s)``, is read as ``s``: group
starts are not negative). With nonnegative sizes the groups' rows are in order
and disjoint, so each row of ``out`` is written once: row ``r`` of group ``g`` is
``lhs[r] @ rhs[g]`` for the first ``min(sizes[g], W)`` rows of the group, every
other row zero. That is the grouped kernel's product (its rows clipped to W).
"""

import functools
import typing

import jax
import numpy as np

from .attention_match import _producers
from .epilogue import _flattened, _is_literal

# --- the staged runtime (pasted into candidates from here on) ---
class _GroupedScan(typing.NamedTuple):
    """A scan that is a grouped matmul: outer-jaxpr vars of lhs (M, K), rhs (G, K, N) and the sizes (G,), the
    window W, and the index of a ``slice`` of the result's first M rows that the kernel's output replaces (or
    None)."""

    lhs: typing.Any
    rhs: typing.Any
    sizes: typing.Any
    window: int
    sliced: typing.Any


def _symbolic(jaxpr, names):
    """{var: an expression tree} for every var of a loop body: invars named by ``names``; a literal as ("lit",
    value); an equation as (primitive, its operands' trees, its static params that matter here)."""
    env = dict(zip(jaxpr.invars, names, strict=True))

    def tree(v):
        return ("lit", np.asarray(v.val).item() if np.ndim(v.val) == 0 else None) if _is_literal(v) else env[v]

    for eqn in jaxpr.eqns:
        name, args = eqn.primitive.name, tuple(tree(v) for v in eqn.invars)
        shape = tuple(eqn.outvars[0].aval.shape)
        if name == "select_n" and len(args) == 3 and args[0] == ("lt", (args[1], ("lit", 0)), ()) \
                and args[2][0] == "add" and args[2][1][0] == args[1]:
            env[eqn.outvars[0]] = args[1]  # jnp's wrap of a negative index: starts are not negative
            continue
        static = ()
        if name in ("dynamic_slice", "broadcast_in_dim", "reshape", "squeeze", "iota"):
            static = (shape, eqn.params.get("dimension", None))
        elif name == "dot_general":
            static = (str(eqn.params["dimension_numbers"]), str(eqn.params.get("preferred_element_type")))
        elif name == "convert_element_type":
            static = (str(eqn.params["new_dtype"]),)
        elif name not in ("lt", "add", "select_n", "dynamic_update_slice"):
            static = ("opaque", id(eqn))  # never equal to a pattern below
        for v in eqn.outvars:
            env[v] = (name, args, static)
    return env


def _const_at_i(tree, rank=1):
    """The const index j when ``tree`` is ``const_j[i]``: a dynamic slice of a rank-``rank`` const at the loop
    index (zeros after it), one along the first axis (all of it for a table of scalars), squeezed; else None."""
    if tree[0] not in ("squeeze", "reshape") or tree[1][0][0] != "dynamic_slice":
        return None
    ds = tree[1][0]
    const, index, size = ds[1][0], ds[1][1:], ds[2][0]
    if const[0] != "const" or index != (("i",), *[("lit", 0)] * (rank - 1)) or len(size) != rank or size[0] != 1:
        return None
    return const[1]


def _is_zero(tree):
    """Whether ``tree`` is a zero literal, broadcast or converted."""
    if tree[0] == "lit":
        return tree[1] is not None and tree[1] == 0
    return tree[0] in ("broadcast_in_dim", "convert_element_type") and len(tree[1]) == 1 and _is_zero(tree[1][0])


def _window_of(tree, base, start):
    """The (W, width) of ``dynamic_slice(base, (start, 0), (W, width))``, else None."""
    if tree[0] != "dynamic_slice" or tree[1] != (base, start, ("lit", 0)) or len(tree[2][0]) != 2:
        return None
    return tree[2][0]


def _grouped_body(body, n_consts):
    """(const index of lhs, of rhs, of the starts, of the sizes, of the row iota or None, W), or None."""
    names = [("const", j) for j in range(n_consts)] + [("carry",), ("i",)]
    if len(body.invars) != n_consts + 2 or len(body.outvars) != 1:
        return None
    new = _symbolic(body, names).get(body.outvars[0])
    if new is None or new[0] != "dynamic_update_slice" or len(new[1]) != 4 or new[1][0] != ("carry",) \
            or new[1][3] != ("lit", 0) or new[1][1][0] != "add":
        return None
    update, start = new[1][1], new[1][2]
    starts = _const_at_i(start)
    for current, added in (update[1], update[1][::-1]) if starts is not None else ():
        window = _window_of(current, ("carry",), start)
        found = window and _grouped_product(added, start, window)
        if found:
            return (*found[:2], starts, *found[2:])
    return None


def _grouped_product(tree, start, window):
    """(lhs const, rhs const, sizes const, row-iota const or None, W) when ``tree`` is the masked, cast product
    of the group's window and weights, ``window`` (W, N) rows; else None."""
    if tree[0] == "convert_element_type":
        tree = tree[1][0]
    if tree[0] != "select_n" or len(tree[1]) != 3:
        return None
    pred, fill, product = tree[1]
    if not (_is_zero(fill) and pred[0] == "lt" and product[0] == "dot_general"
            and product[2][0] == str((((1,), (0,)), ((), ())))):
        return None
    rows, size = pred[1]
    sizes = _const_at_i(size)
    if sizes is None or not (rows[0] == "const" or (rows[0] == "iota" and rows[2] == (window, 0))):
        return None
    x, w = product[1]
    lhs = x[1][0] if x[0] == "dynamic_slice" and x[1][0][0] == "const" else None
    rhs = _const_at_i(w, rank=3)
    if lhs is None or rhs is None or (_window_of(x, lhs, start) or (None,))[0] != window[0]:
        return None
    return lhs[1], rhs, sizes, rows[1] if rows[0] == "const" else None, window[0]


def _plain_ragged(eqn):
    """Whether a ``ragged_dot_general`` is ``lax.ragged_dot``'s own form, the grouped kernel's: lhs (M, K) ragged
    along M, rhs (G, K, N) grouped along G, every group's rows from 0 (no group offset)."""
    if eqn.primitive.name != "ragged_dot_general":
        return False
    p = eqn.params
    dn = p["ragged_dot_dimension_numbers"]
    return p.get("group_offset") is None \
        and len(eqn.invars[0].aval.shape) == 2 and len(eqn.invars[1].aval.shape) == 3 \
        and tuple(map(tuple, dn.dot_dimension_numbers[0])) == ((1,), (1,)) \
        and not any(dn.dot_dimension_numbers[1]) and tuple(dn.lhs_ragged_dimensions) == (0,) \
        and tuple(dn.rhs_group_dimensions) == (0,)


def _grouped_scans(jaxpr):
    """{index of a scan that is a grouped matmul: its ``_GroupedScan``} in a flattened jaxpr."""
    producer, uses = _producers(jaxpr), {}
    for j, e in enumerate(jaxpr.eqns):
        for v in e.invars:
            if not _is_literal(v):
                uses.setdefault(v, []).append(j)
    found = {}
    for index, eqn in enumerate(jaxpr.eqns):
        plan = _grouped_scan(jaxpr, eqn, producer, uses) if eqn.primitive.name == "scan" else None
        if plan is not None:
            found[index] = plan
    return found


def _grouped_scan(jaxpr, eqn, producer, uses):
    p = eqn.params
    nc = p["num_consts"]
    if p["num_carry"] != 1 or len(eqn.invars) != nc + 2 or len(eqn.outvars) != 1:
        return None
    consts, init, xs = eqn.invars[:nc], eqn.invars[nc], eqn.invars[nc + 1]
    made = functools.partial(_made_by, jaxpr, producer)
    if not (_is_iota(made(xs, "iota"), (p["length"],)) and _zeros(made(init, "broadcast_in_dim"))):
        return None  # decided from the outer program, before its body is traced again
    body = p["jaxpr"]
    body, _ = _flattened(body.jaxpr, body.consts,
                         [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in body.jaxpr.invars])
    found = _grouped_body(body, nc)
    if found is None:
        return None
    lhs, rhs, starts, sizes = (consts[j] for j in found[:4])
    window, out = found[5], eqn.outvars[0].aval.shape
    if not (_shapes_agree(lhs, rhs, sizes, window, out, p["length"])
            and (found[4] is None or _is_iota(made(consts[found[4]], "iota"), (window, out[1])))
            and _exclusive_cumsum(made, starts, sizes)):
        return None
    return _GroupedScan(lhs, rhs, sizes, window, _first_rows_slice(jaxpr, eqn.outvars[0], uses, lhs.aval.shape[0]))


def _shapes_agree(lhs, rhs, sizes, window, out, g):
    """lhs (M, K) and rhs (G, K, N) float, sizes (G,), a carry of at least M rows of N, a window within M."""
    (m, k), floats = lhs.aval.shape, all("float" in str(a.aval.dtype) for a in (lhs, rhs))
    return floats and rhs.aval.shape[:2] == (g, k) and out[0] >= m and out[1] == rhs.aval.shape[2] \
        and window <= m and sizes.aval.shape == (g,)


def _first_rows_slice(jaxpr, carry, uses, m):
    """The index of the one use of the loop's result when it is a slice of its first M rows, else None."""
    after = uses.get(carry, [])
    if len(after) != 1 or carry in jaxpr.outvars:
        return None
    cut = jaxpr.eqns[after[0]]
    whole = cut.primitive.name == "slice" and tuple(cut.params["start_indices"]) == (0, 0) \
        and tuple(cut.params["limit_indices"]) == (m, carry.aval.shape[1]) \
        and not any(s != 1 for s in cut.params["strides"] or ())
    return after[0] if whole else None


def _made_by(jaxpr, producer, v, name):
    """The equation making ``v`` if it is a ``name``, else None."""
    e = jaxpr.eqns[producer[v]] if not _is_literal(v) and v in producer else None
    return e if e is not None and e.primitive.name == name else None


def _is_iota(eqn, shape):
    return eqn is not None and tuple(eqn.params["shape"]) == shape and eqn.params["dimension"] == 0


def _zeros(eqn):
    return eqn is not None and _is_literal(eqn.invars[0]) and np.all(np.asarray(eqn.invars[0].val) == 0)


def _exclusive_cumsum(made, starts, sizes):
    """Whether ``starts`` is ``concatenate([0], cumsum(sizes)[:-1])`` or ``cumsum(sizes) - sizes``."""
    def cumsum_of(v):
        e = made(v, "cumsum")
        return e is not None and e.invars[0] == sizes and e.params["axis"] == 0 and not e.params["reverse"]

    sub = made(starts, "sub")
    if sub is not None:
        return cumsum_of(sub.invars[0]) and sub.invars[1] == sizes
    cat = made(starts, "concatenate")
    if cat is None or cat.params["dimension"] != 0 or len(cat.invars) != 2:
        return False
    head, rest = made(cat.invars[0], "broadcast_in_dim"), made(cat.invars[1], "slice")
    g = sizes.aval.shape[0]
    return _zeros(head) and head.outvars[0].aval.shape == (1,) and rest is not None \
        and tuple(rest.params["start_indices"]) == (0,) and tuple(rest.params["limit_indices"]) == (g - 1,) \
        and cumsum_of(rest.invars[0])
