# Closes every descriptor below 700 but the standard three, as a daemon does,
# then allocates on: memtool's socket and shared send buffer sit above that.
import os

import torch

a = torch.empty(1_000_000, dtype=torch.uint8)
mine = []
for name in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        continue
    if "memtool-records" in target:
        mine.append(int(name))
print("buffers below 767:", sum(fd < 767 for fd in mine), "above:", sum(fd >= 767 for fd in mine))
os.closerange(3, 700)
b = torch.empty(2_000_000, dtype=torch.uint8)
