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
