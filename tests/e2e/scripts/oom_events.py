# 600 temporaries, then 64 MiB storages until the CPU allocator fails (as oom.py:
# the address space is limited to what the process maps now plus 1 GiB). The
# event log's last 1,000 events end with the refused request (EventsTest.cpp).
import resource

import torch


def mapped_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def grow(held):
    held.append(torch.ones(64 << 20, dtype=torch.uint8))  # the failing line (line 15)


for _ in range(600):
    t = torch.empty(4096, dtype=torch.uint8)
    del t
resource.setrlimit(resource.RLIMIT_AS, (mapped_bytes() + (1 << 30), resource.RLIM_INFINITY))
held = []
while True:
    grow(held)
