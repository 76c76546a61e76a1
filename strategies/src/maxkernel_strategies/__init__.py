"""Built-in maxkernel strategies, registered through the same entry points a third party uses."""
