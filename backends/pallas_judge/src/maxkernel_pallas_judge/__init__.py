"""The sandboxed one-program judge the Pallas backends share (``maxkernel-pallas-judge``).

A candidate's Python runs once, in its own sandbox, to trace one program; everything judged derives from
that program, in a checker that never imported it (``judge/``, ``sandbox/``). What is chip-specific comes
from the backend's ``judge.platform.Platform``: the TPU's in ``maxkernel_tpu_pallas``, the GPU's in
``maxkernel_gpu_pallas``. It is a library, not a plugin: it registers nothing.
"""
