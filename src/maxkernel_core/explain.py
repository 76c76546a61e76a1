"""Speed figures in words a newcomer reads: which two times, of what kind, and what 1x means.

The CLI's closing lines and report.html say the same sentence, so the number a
user acts on is explained the same way wherever it is shown.
"""

from __future__ import annotations


def speed_sentence(profile, target: str) -> str:
    """What the headline figure is, in words a newcomer reads: which two times, of what kind, and what 1x means."""
    if not profile or not profile.seconds:
        return "Speed: not estimated or measured."
    if profile.estimated:
        basis = profile.estimate_basis or f"the program was compiled for {target} and modelled, not run on one"
        kind = f"estimated by the backend's cost model for {target} (an estimate: {basis})"
    else:
        kind = f"measured on a {target} device"
    text = f"Speed: {profile.seconds * 1e6:,.1f} us per call, {kind}."
    if profile.speedup and profile.reference_seconds:
        faster = (f"{profile.speedup:.2f}x faster than" if profile.speedup >= 1
                  else f"{1 / profile.speedup:.2f}x slower than")
        reference = profile.reference_basis or "XLA's own compilation of the task's reference"
        text += (f" {reference} takes {profile.reference_seconds * 1e6:,.1f} us "
                 f"{'by the same model' if profile.estimated else 'measured the same way'}, so the kernel is "
                 f"{faster} XLA ({profile.speedup:.2f}x; above 1x is faster).")
        if profile.reference_note:
            text += f" {profile.reference_note}"
    return text
