"""TPU-specific parts of the judge: the deviceless libtpu compile and Mosaic TPU kernel facts."""
