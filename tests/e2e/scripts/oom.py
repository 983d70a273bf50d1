# Allocates 64 MiB storages until the CPU allocator fails: the address space is
# limited (RLIMIT_AS) to what the process maps now plus 1 GiB, so the failure
# comes from posix_memalign inside torch, which raises its out-of-memory error.
# The program dies of it (exit 1), as a real one would. (OomTest in CliTest.cpp)
import resource

import torch


def mapped_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def grow(held):
    held.append(torch.ones(64 << 20, dtype=torch.uint8))  # the failing line


resource.setrlimit(resource.RLIMIT_AS, (mapped_bytes() + (1 << 30), resource.RLIM_INFINITY))
held = []
while True:
    grow(held)
