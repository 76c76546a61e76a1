"""One speed figure, worded one way: its kind, chip and source; a ratio only between figures of one kind; a
kernel slower than XLA never read as a speedup; measured figures ranked above estimates."""

from __future__ import annotations

import pytest
from maxkernel_core import Profile, Speed
from maxkernel_core.speed import phrase, rank, ratio_words, sentence, versus

MEASURED_SLOWER = Profile("c1", "device_trace", False, 893e-6, 736e-6, chip="TPU v5 lite (v5e)", reference_measured=True)
ESTIMATED_FASTER = Profile("c2", "cost_model", True, 1024.9e-6, 2253.7e-6, chip="v5e",
                           accuracy="ranked at a correlation of 0.31 (source: issue 43).")


def test_a_measured_kernel_slower_than_xla_reads_slower_with_its_kinds():
    assert MEASURED_SLOWER.speedup == pytest.approx(736 / 893)
    assert versus(MEASURED_SLOWER) == "0.82x XLA (slower, measured/measured)"
    assert phrase(MEASURED_SLOWER) == "893.0 us measured on TPU v5 lite (v5e), 0.82x XLA (slower, measured/measured)"
    text = sentence(MEASURED_SLOWER, "v5e")
    assert "slower than XLA (0.82x: XLA's own program is faster)" in text and "faster than XLA" not in text
    assert "measured on the chip" in text


def test_an_estimate_says_so_and_how_wrong_estimates_have_been():
    text = sentence(ESTIMATED_FASTER, "v5e")
    assert "estimated by the backend's cost model" in text and "2.20x faster than XLA (estimated/estimated" in text
    assert text.endswith("How wrong such estimates have been: ranked at a correlation of 0.31 (source: issue 43).")
    assert "How wrong" not in sentence(MEASURED_SLOWER, "v5e")


def test_no_ratio_is_taken_across_kinds():
    mixed = Profile("c3", "device_trace", False, 1e-3, 2e-3, reference_measured=False)
    assert mixed.speedup is None and mixed.speed.comparison == "measured/estimated"
    assert versus(mixed).startswith("no ratio to XLA")
    assert "no ratio is taken across kinds" in sentence(mixed, "v5e")


def test_a_ratio_that_prints_as_one_is_neither_faster_nor_slower():
    level = Profile("c4", "cost_model", True, 1000e-6, 998e-6, chip="h100")
    text = sentence(level, "h100")
    assert "as fast as XLA (1.00x" in text and "slower" not in text and "faster than" not in text
    assert ratio_words(0.998, "estimated") == "1.00x XLA (level, estimated/estimated)"
    assert ratio_words(0.994, "estimated") == "0.99x XLA (slower, estimated/estimated)"


def test_stored_ratios_are_worded_the_same_way():
    assert ratio_words(0.5, "estimated") == "0.50x XLA (slower, estimated/estimated)"
    assert ratio_words(1.25, "measured/measured") == "1.25x XLA (faster, measured/measured)"
    assert ratio_words(None, "measured") == ""


def test_measured_figures_rank_above_estimates_whatever_their_seconds():
    fast_estimate = Profile("e", "cost_model", True, 1e-6, 1e-3)
    slow_measurement = Profile("m", "device_trace", False, 1e-3, 1e-3)
    assert sorted([fast_estimate, None, slow_measurement], key=rank) == [slow_measurement, fast_estimate, None]
    assert Speed(2e-3, True).ratio is None  # no reference, no ratio
