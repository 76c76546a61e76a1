"""The traced program's wire from the tracer to the checker (``judge/jaxpr_wire.py``): what an honest program
holds crosses and reads back the same; anything else is refused, never imported."""

from __future__ import annotations

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import jaxpr_as_fun
from maxkernel_pallas_judge.judge import jaxpr_wire


def _round_trip(fn, *args):
    closed = jax.make_jaxpr(fn)(*args)
    back = jaxpr_wire.loads(jaxpr_wire.dumps(closed))
    return closed, back


def test_a_program_that_draws_random_numbers_crosses_and_computes_the_same():
    """LLM-written kernels call jax.random (a dropout mask, noise); the program holds PRNG key types and a PRNG
    implementation, which cross by name and come back from jax's own registry."""
    def noisy(x):
        key = jax.random.fold_in(jax.random.key(7), 3)
        return x + jax.random.uniform(key, x.shape)

    x = jnp.arange(8.0)
    closed, back = _round_trip(noisy, x)
    np.testing.assert_array_equal(jaxpr_as_fun(back)(x)[0], jaxpr_as_fun(closed)(x)[0])


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_a_key_of_each_implementation_crosses_as_a_constant(impl):
    key = jax.random.key(1, impl=impl)
    closed, back = _round_trip(lambda: jax.random.bits(key, (4,)))
    np.testing.assert_array_equal(jaxpr_as_fun(back)()[0], jaxpr_as_fun(closed)()[0])


def test_anything_off_the_list_is_refused_not_imported():
    class Sneaky:
        def __reduce__(self):
            return (print, ("ran in the checker",))

    with pytest.raises(jaxpr_wire.WireError, match="builtins.print"):
        jaxpr_wire.loads(pickle.dumps(Sneaky()))


@pytest.mark.parametrize("prefix, what", [
    # BUILD with a slot state on the Var class itself: setattr(Var, "__init__", frozenset) (red team)
    (b"cjax._src.core\nVar\nN}X\x08\x00\x00\x00__init__cbuiltins\nfrozenset\ns\x86b0", "changes Var in place"),
    # SETITEMS on an allowed global (the pytree registry every program's treedefs use)
    (b"cjax._src.tree_util\ndefault_registry\n(X\x01\x00\x00\x00aX\x01\x00\x00\x00bu0", "in place"),
])
def test_a_program_that_changes_the_checkers_classes_is_refused(prefix, what):
    """The checker is kept across candidates: a program may build objects, never change the judge's own."""
    from jax._src import core

    data = jaxpr_wire.dumps(jax.make_jaxpr(lambda x: x * 2)(jnp.arange(4.0)))
    init = core.Var.__init__
    with pytest.raises(jaxpr_wire.WireError, match=what):
        jaxpr_wire.loads(data[:2] + prefix + data[2:])
    assert core.Var.__init__ is init
