# Known allocations for the line table (tests/e2e/RunPythonTest.cpp asserts them).
# Every section frees what it allocated before the next starts.
import threading

import torch

MiB = 1 << 20


def inner():
    return torch.empty(8 * MiB, dtype=torch.uint8)  # line 11: peaks at 12 MiB


def outer():
    held = torch.empty(4 * MiB, dtype=torch.uint8)  # line 15: peaks at 4 MiB
    t = inner()  # line 16: the call, peaks at 12 MiB
    del t
    small = torch.empty(1 * MiB, dtype=torch.uint8)  # line 18: 4 + 1 live, peaks at 5 MiB
    return held.numel() + small.numel()


def recurse(n):
    if n == 0:
        return torch.empty(2 * MiB, dtype=torch.uint8)  # line 24
    return recurse(n - 1)  # line 25: three times on one stack, counted once


def generate():
    for _ in range(2):
        yield torch.empty(3 * MiB, dtype=torch.uint8)  # line 30: twice


def worker(box):
    box.append(torch.empty(6 * MiB, dtype=torch.uint8))  # line 34: in a threading.Thread


outer()  # line 37
recurse(3)  # line 38
for chunk in generate():  # line 39
    del chunk
make = lambda: torch.empty(7 * MiB, dtype=torch.uint8)  # line 41
made = make()  # line 42
del made
box = []
thread = threading.Thread(target=worker, args=(box,))
thread.start()
thread.join()
box.clear()
