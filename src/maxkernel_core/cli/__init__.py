"""The ``maxkernel`` command line."""
