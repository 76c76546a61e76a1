"""A name or signature the installed jax does not have gets what it offers instead, found by introspection."""

from __future__ import annotations

import jax
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from maxkernel_pallas_judge.judge.api_drift import hint


def raised(fn) -> BaseException:
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def test_a_name_that_moved_is_found_where_it_lives_now():
    text = hint(raised(lambda: pltpu.ANY_MEMORY_SPACE_THAT_MOVED)) if not hasattr(pl, "ANY_MEMORY_SPACE_THAT_MOVED") else ""
    assert f"jax {jax.__version__} has no pltpu.ANY_MEMORY_SPACE_THAT_MOVED" in text
    if hasattr(pl, "ANY") and not hasattr(pltpu, "ANY"):
        assert "pl.ANY" in hint(raised(lambda: pltpu.ANY))


def test_a_same_name_elsewhere_is_offered_with_a_caution():
    if hasattr(pltpu, "repeat"):
        pytest.skip("this jax still has pltpu.repeat")
    text = hint(raised(lambda: pltpu.repeat))
    assert "the same name exists as jnp.repeat (check it computes the same)" in text


def test_a_misspelt_name_gets_the_closest_ones():
    assert "closest in jnp: " in hint(raised(lambda: jax.numpy.maximun))
    assert "maximum" in hint(raised(lambda: jax.numpy.maximun))


def test_a_wrong_keyword_gets_the_signature_and_the_likely_name():
    text = hint(raised(lambda: pl.BlockSpec(blockshape=(8, 128))))
    assert "pl.BlockSpec(block_shape" in text and "did you mean block_shape=?" in text


def test_errors_not_about_jax_get_no_hint():
    assert hint(raised(lambda: {}["key"])) == ""
    assert hint(raised(lambda: object().missing)) == ""
