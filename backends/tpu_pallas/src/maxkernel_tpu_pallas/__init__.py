"""The TPU Pallas backend of maxkernel: tasks, the sandboxed judge, deviceless TPU compiles, profiling."""
