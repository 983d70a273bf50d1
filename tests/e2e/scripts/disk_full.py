# A disk-backed pause where the backup directory has no room (EnduranceTest.cpp: an
# 8 MiB tmpfs for a 16 MiB region): the pause fails before anything is released,
# and the region's content is where it was.
import memtool
import torch

N = 16 * (1 << 20) // 8
with memtool.region("w", backup="disk"):
    w = torch.arange(N, dtype=torch.int64)
r = memtool.pause("w")
print("pause", r.ok, r.changed, r.bytes, flush=True)
print("message", r.message, flush=True)
print("state", [(g.tag, g.state) for g in memtool.regions()], flush=True)
print("intact", int(w.sum()) == N * (N - 1) // 2, flush=True)
