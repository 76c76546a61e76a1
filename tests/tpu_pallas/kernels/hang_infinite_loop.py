# @include honest_matmul.py as honest_computation


def computation(x, y):
    while True:
        pass
    return honest_computation(x, y)
