import os

os._exit(0)
