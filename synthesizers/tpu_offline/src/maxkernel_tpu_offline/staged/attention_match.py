"""Finding attention in a staged program's jaxpr, for the flash kernel of staged_attention.py; copied
verbatim into every staged candidate below the marker.

An attention here is, by equation,

    s = tail(dot_general(q, k))          elementwise ops on the scores, one query and one key axis
    p = exp(s - max s) / sum exp(...)    jax.nn.softmax over the key axis (its casts, broadcasts,
                                         stop_gradient and -inf initial max included)
    o = dot_general(p, v)                contracting that axis, batch dims in the scores' order

whose every value but ``o`` is used inside it alone. The tail's other operands
must be literals, *positional* values (iota, literals and elementwise ops on
them, an iota along the query or key axis only), int32 scalars of the
program, or int32 values that vary along batch axes alone (a decode's
per-sequence lengths under ``vmap``: one scalar per batch item); anything else
(a bias read per score) leaves the attention to the matmul kernels. k and v may be ``jnp.repeat``ed over a batch dim together
(grouped-query attention): the kernel then reads them once.
"""

import typing

import numpy as np

from .epilogue import _TAIL_PRIMS, _is_literal

# --- the staged runtime (pasted into candidates from here on) ---
class _Attention(typing.NamedTuple):
    """One attention in a jaxpr, by equation index: the scores' matmul, their elementwise tail, the softmax,
    the output matmul and which of its operands the weights are; ``positional``: {var: the score axis ("b",
    "m" or "n"; batch axes are "b0", "b1", ...) each of its dims runs along} for every value the tail computes
    from positions alone, "scalar" for an int32 scalar of the program it reads (a sequence's length), or
    ("batch", its dims' axes) for an int32 value along batch axes alone (a length per sequence); ``fold``: (batch position, g)
    when k and v are ``jnp.repeat``ed g times along that batch dim (grouped-query attention), else None."""

    scores: int
    tail: list
    softmax: list
    out: int
    p_side: int
    positional: dict
    fold: typing.Any

    def members(self):
        return {self.scores, *self.tail, *self.softmax}

    def scalars(self):
        return [v for v, axes in self.positional.items() if axes == "scalar"]

    def batch_scalars(self):
        """[(var, the score axis of each of its dims)] for the int32 values that vary along batch axes alone."""
        return [(v, axes[1]) for v, axes in self.positional.items() if isinstance(axes, tuple) and axes[:1] == ("batch",)]


def _attention_plans(jaxpr, repeats):
    """{index of the output matmul: _Attention} for every attention the flash kernel can run."""
    producer = _producers(jaxpr)
    uses = {}
    for j, e in enumerate(jaxpr.eqns):
        for v in e.invars:
            if not _is_literal(v):
                uses.setdefault(v, set()).add(j)
    outputs = {v for v in jaxpr.outvars if not _is_literal(v)}
    plans, taken = {}, set()
    for index, eqn in enumerate(jaxpr.eqns):
        if eqn.primitive.name != "dot_general":
            continue
        for side in (0, 1):
            plan = _attention_at(jaxpr, index, side, producer, repeats)
            # an equation is in one attention at most: another's output matmul would be skipped as a member
            if plan is None or (plan.members() | {index}) & taken:
                continue
            made = {v for j in plan.members() for v in jaxpr.eqns[j].outvars}
            if all(v not in outputs and uses.get(v, set()) <= plan.members() | {index} for v in made):
                plans[index] = plan
                taken |= plan.members() | {index}
                break
    return plans


def _producers(jaxpr):
    """{var: index of the equation that makes it}."""
    return {v: j for j, e in enumerate(jaxpr.eqns) for v in e.outvars}


def _attention_at(jaxpr, out, side, producer, repeats):
    """The attention whose softmax weights are operand ``side`` of the matmul ``out``, or None."""
    eqns, dot2 = jaxpr.eqns, jaxpr.eqns[out]
    found = _softmax_of(jaxpr, dot2.invars[side], producer)
    if found is None:
        return None
    s, softmax = found
    shape = s.aval.shape
    nb = len(shape) - 2
    contracted, batch = (dims[side] for dims in dot2.params["dimension_numbers"])
    if tuple(contracted) != (nb + 1,) or tuple(batch) != tuple(range(nb)):
        return None
    axes = tuple(f"b{i}" for i in range(nb)) + ("m", "n")
    positional, tail, v = {}, [], s
    while v in producer and eqns[producer[v]].primitive.name != "dot_general":
        e = eqns[producer[v]]
        if e.primitive.name not in _TAIL_PRIMS or e.outvars[0].aval.shape != shape:
            return None
        path = [u for u in e.invars if not _is_literal(u) and not _positional(jaxpr, u, axes, producer, positional)]
        if len(path) != 1:
            return None
        tail.append(producer[v])
        v = path[0]
    if v not in producer:
        return None
    scores = producer[v]
    (lc, rc), (lb, rb) = eqns[scores].params["dimension_numbers"]
    q, k = eqns[scores].invars
    if len(lb) != nb or q.aval.ndim - len(lc) - len(lb) != 1 or k.aval.ndim - len(rc) - len(rb) != 1:
        return None
    fold = _fold(q, k, rb, dot2, side, repeats)
    plan = None if fold is False else _Attention(scores, tail[::-1], softmax, out, side, positional, fold)
    if plan and fold and any(f"b{fold[0]}" in along for _, along in plan.batch_scalars()):
        return None  # a per-item value that varies over a kv head's query group: the group is on the rows
    return plan


def _fold(q, k, k_batch, dot2, side, repeats):
    """(batch position, g) when k and v are both repeats of g along the same batch dim of the scores, None when
    neither is repeated, False for any other repeat (the matmul kernels take those)."""
    v = dot2.invars[1 - side]
    v_batch = dot2.params["dimension_numbers"][1][1 - side]
    rk, rv = repeats.get(k), repeats.get(v)
    if not (rk or rv or repeats.get(q)):
        return None
    if repeats.get(q) or not (rk and rv) or rk[2] != rv[2] or rk[1] not in k_batch:
        return False
    at = list(k_batch).index(rk[1])
    return (at, rk[2]) if v_batch[at] == rv[1] else False


def _stripped(jaxpr, v, producer, names, taken):
    """``v`` with the equations named in ``names`` that made it peeled off (their indices added to ``taken``)."""
    while v in producer and jaxpr.eqns[producer[v]].primitive.name in names:
        taken.append(producer[v])
        v = jaxpr.eqns[producer[v]].invars[0]
    return v


def _softmax_of(jaxpr, p, producer):
    """(the scores, the softmax's equation indices) when ``p`` is jax.nn.softmax of scores over their last axis:
    exp(s - max s) / sum exp(s - max s), with the casts, broadcasts and stop_gradient jax puts between."""
    eqns, taken = jaxpr.eqns, []
    convert, spread = ("convert_element_type",), ("convert_element_type", "broadcast_in_dim", "stop_gradient")
    div = _stripped(jaxpr, p, producer, convert, taken)
    if div not in producer or eqns[producer[div]].primitive.name != "div":
        return None
    taken.append(producer[div])
    num, den = eqns[producer[div]].invars
    e = _stripped(jaxpr, num, producer, convert, taken)
    total = _stripped(jaxpr, den, producer, spread, taken)
    last = (e.aval.ndim - 1,)
    if not _is_op(jaxpr, total, "reduce_sum", producer, last) or e not in producer \
            or eqns[producer[e]].primitive.name != "exp":
        return None
    taken.append(producer[total])
    if _stripped(jaxpr, eqns[producer[total]].invars[0], producer, convert, taken) is not e:
        return None
    taken.append(producer[e])
    sub = eqns[producer[e]].invars[0]
    if sub not in producer or eqns[producer[sub]].primitive.name != "sub":
        return None
    taken.append(producer[sub])
    s, peak = eqns[producer[sub]].invars
    peak = _stripped(jaxpr, peak, producer, spread, taken)
    if peak in producer and eqns[producer[peak]].primitive.name == "max":  # jnp.max's -inf initial value
        a, b = eqns[producer[peak]].invars
        if not (_is_literal(a) and np.isneginf(a.val)):
            return None
        taken.append(producer[peak])
        peak = b
    if not _is_op(jaxpr, peak, "reduce_max", producer, last) or eqns[producer[peak]].invars[0] is not s:
        return None
    taken.append(producer[peak])
    return s, sorted(taken)


def _is_op(jaxpr, v, name, producer, axes):
    return v in producer and jaxpr.eqns[producer[v]].primitive.name == name \
        and tuple(jaxpr.eqns[producer[v]].params["axes"]) == axes


def _positional(jaxpr, v, axes, producer, found):
    """Whether ``v`` is computed from positions alone (iota, literals and elementwise ops on them) with its dims
    along score axes ``axes`` ("b0", "b1", ... batch, "m" queries, "n" keys, None: a size-1 dim), an iota only
    along "m" or "n"; ``found`` gets {value: its axes} for v and everything it is made from. An int32 value
    that is none of these is a scalar of the program (0-d) or one per batch item (dims along batch axes only)."""
    if _is_literal(v):
        return True
    if v in found:
        return found[v] in (axes, "scalar", ("batch", axes))
    e = jaxpr.eqns[producer[v]] if v in producer else None
    name = e.primitive.name if e is not None else None
    if e is None:
        ok = False
    elif name == "iota":
        ok = axes[e.params["dimension"]] in ("m", "n") or v.aval.shape[e.params["dimension"]] == 1
    elif name == "broadcast_in_dim":
        x = e.invars[0]
        inner = tuple(None if x.aval.shape[i] == 1 else axes[d] for i, d in enumerate(e.params["broadcast_dimensions"]))
        ok = _positional(jaxpr, x, inner, producer, found)
    elif name in _TAIL_PRIMS and len(e.outvars) == 1:
        ok = all(_positional(jaxpr, u, axes if u.aval.ndim == len(axes) else (), producer, found) for u in e.invars)
    else:
        ok = False
    if not ok:
        axes = _program_int(v, axes)
        ok = axes is not None
    if ok:
        found[v] = axes
    return ok


def _program_int(v, axes):
    """How the kernel reads an int32 value of the program that is not positional: "scalar" for a 0-d one,
    ("batch", its dims' axes) for one along distinct batch axes alone (a length per sequence); else None."""
    if v.aval.dtype != np.int32:
        return None
    if v.aval.ndim == 0:
        return "scalar"
    if len(axes) != v.aval.ndim:
        return None
    along = tuple(None if n == 1 else a for a, n in zip(axes, v.aval.shape, strict=True))
    named = [a for a in along if a is not None]
    return ("batch", along) if named and all(a[0] == "b" for a in named) and len(set(named)) == len(named) else None
