"""The figures of TorchCudaRegions (one JSON object a line, from regions_cuda.py) as a
table: pause and resume of a 1 GiB CUDA region beside a plain pinned copy of the
same GiB, and what the pause gave back to the device."""
import json
import sys

GiB = 1 << 30
print(f"{'mode':<8} {'backup':<6} {'pause s':>8} {'resume s':>9} {'pinned D2H s':>12} {'pinned H2D s':>12}"
      f" {'pause/D2H':>9} {'resume/H2D':>10}  freed by pause")
for line in sys.stdin:
    r = json.loads(line)
    print(f"{r['mode']:<8} {r['backup']:<6} {r['pause_s']:>8.3f} {r['resume_s']:>9.3f} {r['pinned_d2h_s']:>12.3f}"
          f" {r['pinned_h2d_s']:>12.3f} {r['pause_s'] / r['pinned_d2h_s']:>9.2f} {r['resume_s'] / r['pinned_h2d_s']:>10.2f}"
          f"  {r['freed_by_pause']:,} ({r['freed_by_pause'] / GiB:.3f} GiB)")
