"""The figures of TorchCudaRegions (one JSON object a line, from regions_cuda.py) as a
table: pause and resume of a 1 GiB CUDA region beside the bare operations on the
same GiB, and what the pause gave back to the device. A first pause must pin its
host buffer: its bare operation is pinning a buffer and copying to it; a later one
reuses the buffer: a copy to memory pinned beforehand."""
import json
import sys

GiB = 1 << 30
print(f"{'mode':<8} {'backup':<6} {'round':<5} {'pause s':>8} {'resume s':>9} {'bare D2H s':>10} {'pinned H2D s':>12}"
      f" {'pause/bare':>10} {'resume/H2D':>10}  freed by pause")
for line in sys.stdin:
    r = json.loads(line)
    # The first round pins the backup and makes the copy stream; the second reuses them.
    first_bare = r.get("pin_and_d2h_s", r["pinned_d2h_s"])  # logs before it: the copy alone
    for label, c, bare in (("1st", r["first"], first_bare), ("2nd", r, r["pinned_d2h_s"])):
        print(f"{r['mode']:<8} {r['backup']:<6} {label:<5} {c['pause_s']:>8.3f} {c['resume_s']:>9.3f}"
              f" {bare:>10.3f} {r['pinned_h2d_s']:>12.3f} {c['pause_s'] / bare:>10.2f}"
              f" {c['resume_s'] / r['pinned_h2d_s']:>10.2f}"
              f"  {c['freed_by_pause']:,} ({c['freed_by_pause'] / GiB:.4f} GiB)")
