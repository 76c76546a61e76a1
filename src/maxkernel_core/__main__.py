"""``python -m maxkernel_core`` is the ``maxkernel`` command."""

from .cli.main import main

main()
