# Allocations whose Python stack differs from the one before in one place only:
# a middle frame, the depth, a generator's frame. The frame reader settles the
# frames that stayed in the walk itself; tests/e2e/RunPythonTest.cpp checks its
# figures and compares them with the profile function's.
import torch


def leaf(n):
    return torch.empty(n, dtype=torch.uint8)  # line 9


def via_a(n):
    return leaf(n)  # line 13: 100 x 3,000 bytes


def via_b(n):
    return leaf(n)  # line 17: 100 x 1,000 bytes


def outer(f, n):
    return f(n)  # line 21: the same instruction whichever f is


def down(depth, n):
    if depth == 0:
        return leaf(n)  # line 26: 60 x 100 bytes, at four depths
    return down(depth - 1, n)  # line 27


def generate():
    for _ in range(50):
        yield leaf(10)  # line 32: 50 x 10 bytes


kept = []
for i in range(200):
    kept.append(outer(via_a if i % 2 else via_b, 1000 + (i % 2) * 2000))  # line 37
for i in range(60):
    kept.append(down(i % 4, 100))  # line 39: the depth changes every time
for t in generate():  # line 40
    kept.append(t)
print(sum(t.numel() for t in kept))
