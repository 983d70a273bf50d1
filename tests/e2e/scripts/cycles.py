# Pausable memory through a thousand cycles (EnduranceTest.cpp), under `memtool run
# --pausable all`: a 4 MiB disk-backed region paused and resumed 1,000 times, then
# the whole program yielded and restored 1,000 times, every allocation's content
# checksummed after every cycle.
import memtool
import torch

N = 1 << 19  # 4 MiB of int64 each
with memtool.region("w", backup="disk"):
    w = torch.arange(N, dtype=torch.int64)
x = torch.arange(N, dtype=torch.int64) * 3  # outside the region: only a yield moves it
W, X = N * (N - 1) // 2, 3 * N * (N - 1) // 2


def intact():
    return int(w.sum()) == W and int(x.sum()) == X


failed = []
for i in range(1000):
    p = memtool.pause("w")
    r = memtool.resume("w")
    if not (p.ok and p.changed and r.ok and p.bytes == r.bytes == N * 8 and intact()):
        failed.append((i, p.message, r.message))
print("pause/resume 1000 failed", len(failed), failed[:3], flush=True)
failed = []
for i in range(1000):
    # Both storages go, and come back; a yield also lets go of the free blocks
    # the region kept for reuse (the first one: none are kept after it).
    y = memtool.yield_memory()
    r = memtool.restore()
    if not (y.ok and y.changed and r.ok and r.bytes == 2 * N * 8 and y.bytes >= r.bytes and intact()):
        failed.append((i, y.message, r.message))
print("yield/restore 1000 failed", len(failed), failed[:3], flush=True)
