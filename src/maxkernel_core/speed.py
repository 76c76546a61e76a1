"""Speed figures in words: the one place a ``Speed`` (``records.py``) becomes a phrase or a sentence.

Every report (the CLI's lines, report.html, the bench table, the UI, the prompts a model reads) words a
speed here, so a figure always says its kind (measured or estimated), its chip and its source, a ratio is
only ever taken between two figures of one kind, and a kernel slower than XLA reads "slower", never as a
speedup.
"""

from __future__ import annotations

from .records import Achieved, Profile, Speed

DEFAULT_REFERENCE = "XLA's own compilation of the task's reference"


def as_speed(figure: Profile | Speed | None) -> Speed | None:
    """The speed record of a profile (or the record itself); None when there is no time."""
    if figure is None:
        return None
    speed = figure.speed if isinstance(figure, Profile) else figure
    return speed if speed.seconds else None


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"


def versus(figure: Profile | Speed | None, reference: str = "XLA") -> str:
    """"0.82x XLA (slower, measured/measured)"; where the kinds differ, that no ratio exists; "" without one."""
    speed = as_speed(figure)
    if speed is None or speed.reference_seconds is None:
        return ""
    ratio = speed.ratio
    if ratio is None:
        return f"no ratio to {reference}: the kernel's time is {speed.kind}, {reference}'s {speed.comparison.split('/')[1]}"
    return ratio_words(ratio, speed.comparison, reference)


def direction(ratio: float) -> str:
    """faster, slower, or level: a ratio that prints as 1.00x is neither (0.998 read "1.00x slower")."""
    if f"{ratio:.2f}" == "1.00":
        return "level"
    return "faster" if ratio > 1 else "slower"


def ratio_words(ratio: float | None, comparison: str, reference: str = "XLA") -> str:
    """"0.82x XLA (slower, measured/measured)" from a stored ratio and its kinds (a bench row, a tuned entry);
    "" without a ratio. A ratio under 1 reads slower, unless it prints as 1.00x (``direction``)."""
    if not ratio:
        return ""
    kinds = comparison if "/" in comparison else f"{comparison}/{comparison}"
    return f"{ratio:.2f}x {reference} ({direction(ratio)}, {kinds})"


def phrase(figure: Profile | Speed | None, *, chip: bool = True) -> str:
    """"893.0 us measured on TPU v5 lite, 0.82x XLA (slower, measured/measured)": a figure in one phrase."""
    speed = as_speed(figure)
    if speed is None:
        return "no speed figure"
    where = f" {'on' if speed.measured else 'for'} {speed.chip}" if chip and speed.chip else ""
    text = f"{_us(speed.seconds)} {speed.kind}{where}"
    ratio = versus(speed)
    return f"{text}, {ratio}" if ratio else text


def sentence(figure: Profile | Speed | None, target: str) -> str:
    """The headline figure in words a newcomer reads: which two times, of what kind, what 1x means, and for an
    estimate, how wrong the model has been against measurements."""
    speed = as_speed(figure)
    if speed is None:
        return "Speed: not estimated or measured."
    if speed.measured:
        kind = f"measured on the chip ({speed.chip or target}) from profiler traces"
    else:
        basis = speed.basis or f"the program was compiled for {target} and modelled, not run on one"
        kind = f"estimated by the backend's cost model for {speed.chip or target} (an estimate: {basis})"
    text = f"Speed: {_us(speed.seconds)} per call, {kind}."
    if speed.reference_seconds:
        reference = speed.reference or DEFAULT_REFERENCE
        ratio = speed.ratio
        if ratio is None:
            text += (f" {reference} takes {_us(speed.reference_seconds)}, "
                     f"{'measured' if speed.reference_measured else 'estimated'}: no ratio is taken across kinds.")
        else:
            how = "measured the same way" if speed.measured else "by the same model"
            verdict = {"faster": f"{ratio:.2f}x faster than XLA",
                       "level": "as fast as XLA (1.00x, within half a percent)",
                       "slower": f"slower than XLA ({ratio:.2f}x: XLA's own program is faster)"}[direction(ratio)]
            text += (f" {reference} takes {_us(speed.reference_seconds)} {how}, so the kernel is {verdict} "
                     f"({speed.comparison}; above 1x is faster).")
        if speed.note:
            text += f" {speed.note}"
    if not speed.measured and speed.accuracy:
        text += f" How wrong such estimates have been: {speed.accuracy}"
    return text


#: the name the run's closing lines and report.html have always called
speed_sentence = sentence


def rank(figure: Profile | Speed | None) -> tuple[int, float]:
    """A sort key, best first: measured figures before estimates (never compared as raw seconds with them),
    then the shorter time; no figure last."""
    speed = as_speed(figure)
    if speed is None:
        return (2, float("inf"))
    return (0 if speed.measured else 1, speed.seconds)


def achieved_words(achieved: Achieved | None) -> str:
    """"152.3 TFLOP/s, at least 410 GB/s of HBM, 77% of the roofline": what a measured time achieves."""
    if achieved is None:
        return "-"
    parts = []
    if achieved.tflops is not None:
        parts.append(f"{achieved.tflops:,.1f} TFLOP/s")
    if achieved.hbm_gbs is not None:  # the task's inputs and outputs once: the traffic is at least that
        parts.append(f"at least {achieved.hbm_gbs:,.0f} GB/s of HBM")
    if achieved.roofline_fraction is not None:
        parts.append(f"{achieved.roofline_fraction:.0%} of the roofline")
    return ", ".join(parts) or "-"
