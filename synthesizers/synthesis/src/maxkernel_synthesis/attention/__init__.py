"""Attention-shaped references: find q·kᵀ → softmax over the keys → ·v in the jaxpr, for the flash template.

The reference is run through a small symbolic interpreter. Every array axis
is a *variable* in a union-find: an elementwise op unifies the axes it lines
up, a matmul unifies the axes it contracts or batches over, a reshape splits a
variable into sub-variables or merges several, a ``lax.map`` (a scan with no
carry) is read as a vmap whose iteration variable is the mapped axis. Values
that do not depend on any input (``iota`` positions, masks) are kept as
expressions of their positions and become expressions of the variables where
they meet the data. At the end every variable resolves to *leaves* (its finest
split), so the query positions of a reference that walks over query chunks are
the leaves (chunk index, position in chunk) of q's sequence axis.

The computation is then matched as a tree: an output that is (up to dtype
casts) ``dot(P, v)`` with ``P = exp(S - M) / sum_keys(exp(S - M))`` (or the
normalisation after the matmul), ``M`` constant along the keys (any row
statistic: softmax is shift-invariant), ``S`` an elementwise expression of one
``dot(q, k)`` contracting the head dim, of additive biases read from inputs, of
masks built from positions, and of constants. The keys are the leaves the
softmax sums over, which must be the leaves the second matmul contracts and
the first matmul's free leaves on the k side. Every axis of q, k, v, the
biases and the output is then one of: a grid axis of the kernel (batch, heads;
k and v may hold a contiguous part of a q head axis: grouped-query attention),
the query axis, the key axis, the head dim, the value dim, or of extent 1.

Anything else is declined with the reason.
"""

from __future__ import annotations

import math

from ..ir import Declined, Program
from ..emit import literal
from .interpreter import Interpreter, count_dots
from .recognize import Recognizer
from .spec import AttentionSpec, Clause, Operand
from .symbols import In, Val

__all__ = ["AttentionSpec", "Clause", "Operand", "analyse_attention", "bind_sizes", "count_dots", "literal_texts"]


def analyse_attention(program: Program) -> AttentionSpec:
    """The attention spec of ``program``, or :class:`Declined` with the reason."""
    if len(program.outputs) != 1 or not isinstance(program.outputs[0], str):
        raise Declined(f"the reference returns {len(program.outputs)} outputs; the templates write one")
    interp = Interpreter()
    args = []
    for i, name in enumerate(program.inputs):
        shape = program.shapes[name]
        vars_ = tuple(interp._fresh(e) for e in shape)
        args.append(Val(In(i, vars_, program.dtypes[name]), shape, vars_))
    try:
        (out,) = interp.run(program, args)
        if out.static:
            raise Declined("the output depends on no input")
        return Recognizer(interp, program, out, args).match()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, StopIteration) as exc:
        # a form of jaxpr the interpreter does not know: a decline that names it, not a crash of the plan
        raise Declined(f"the attention analysis could not read this reference ({type(exc).__name__}: {exc})") from exc


def bind_sizes(full: AttentionSpec, small: AttentionSpec) -> list[str]:
    """The numbers of the generated lines as Python text: literal where both sizes agree, else an expression
    of the kernel's sizes (``sq``, ``sk``, ``hd``, ``ev``)."""
    lines = lambda s: (s.q_lines, s.k_lines, s.v_lines, s.score_lines, s.out_lines, s.visible, s.full,  # noqa: E731
                       s.k_first, s.k_last)
    if lines(full) != lines(small) or len(full.constants) != len(small.constants):
        raise Declined("the reference's score pipeline changes with the input size (it is not shape-generic)")
    dims_full = {"sq": full.sq, "sk": full.sk, "hd": full.d, "ev": full.e}
    dims_small = {"sq": small.sq, "sk": small.sk, "hd": small.d, "ev": small.e}
    options = []
    for n in dims_full:
        options += [(f"{n}", lambda d, n=n: d[n]), (f"(1.0 / {n})", lambda d, n=n: 1.0 / d[n]),
                    (f"(1.0 / math.sqrt({n}))", lambda d, n=n: 1.0 / math.sqrt(d[n])),
                    (f"math.sqrt({n})", lambda d, n=n: math.sqrt(d[n]))]
        for m in dims_full:
            if m != n:
                options.append((f"({n} - {m})", lambda d, n=n, m=m: d[n] - d[m]))
    texts = []
    for a, b in zip(full.constants, small.constants, strict=False):
        if a == b or (isinstance(a, float) and math.isclose(a, b, rel_tol=1e-6)):
            texts.append(literal(a))
            continue
        for text, fn in options:
            if math.isclose(fn(dims_full), float(a), rel_tol=1e-6) and math.isclose(fn(dims_small), float(b),
                                                                                      rel_tol=1e-6):
                texts.append(text if isinstance(a, float) or "/" not in text and "sqrt" not in text
                             else f"int({text})")
                break
        else:
            raise Declined(f"a constant of the score pipeline changes with the input size ({a} at full size, {b} at "
                           "small size) in a way the synthesizer cannot express")
    return texts


def literal_texts(spec: AttentionSpec) -> list[str]:
    return [literal(c) for c in spec.constants]
