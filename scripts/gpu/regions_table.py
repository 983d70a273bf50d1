"""The figures of TorchCudaRegions (one JSON object a line, from regions_cuda.py) as a
table: pause and resume of a 1 GiB CUDA region beside a plain pinned copy of the
same GiB, and what the pause gave back to the device."""
import json
import sys

GiB = 1 << 30
print(f"{'mode':<8} {'backup':<6} {'round':<5} {'pause s':>8} {'resume s':>9} {'pinned D2H s':>12} {'pinned H2D s':>12}"
      f" {'pause/D2H':>9} {'resume/H2D':>10}  freed by pause")
for line in sys.stdin:
    r = json.loads(line)
    # The first round pins the backup and makes the copy stream; the second reuses them.
    for label, c in (("1st", r["first"]), ("2nd", r)):
        print(f"{r['mode']:<8} {r['backup']:<6} {label:<5} {c['pause_s']:>8.3f} {c['resume_s']:>9.3f}"
              f" {r['pinned_d2h_s']:>12.3f} {r['pinned_h2d_s']:>12.3f} {c['pause_s'] / r['pinned_d2h_s']:>9.2f}"
              f" {c['resume_s'] / r['pinned_h2d_s']:>10.2f}  {c['freed_by_pause']:,} ({c['freed_by_pause'] / GiB:.4f} GiB)")
