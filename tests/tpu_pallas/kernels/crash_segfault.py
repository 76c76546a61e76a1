import ctypes

ctypes.string_at(0)  # read address 0: SIGSEGV
