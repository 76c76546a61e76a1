"""Kernel descriptions (from the traced program) and profiler trace parsing, shared by the Pallas backends."""
