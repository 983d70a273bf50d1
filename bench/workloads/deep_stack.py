"""A Python call stack of depth 100 that allocates at the bottom, N times."""
import sys

import torch


def descend(depth, n):
    if depth == 0:
        for _ in range(n):
            t = torch.empty(64)
            del t
        return n
    return descend(depth - 1, n)


if __name__ == "__main__":
    print(descend(100, int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))
