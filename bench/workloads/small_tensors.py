"""Allocation-heavy: N small CPU tensors (256 bytes each), each freed at once."""
import sys

import torch


def loop(n):
    total = 0
    for _ in range(n):
        t = torch.empty(64)
        total += t.numel()
    return total


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    print(loop(n))
