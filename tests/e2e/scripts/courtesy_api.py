# memtool.yield_memory() / memtool.restore() from inside, under
# `memtool run --pausable all` (CourtesyTest.cpp): 64 MiB of int64 counting up,
# yielded to disk and restored, then checked.
import os

import torch

import memtool

N = 64 * 2**20 // 8


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


x = torch.arange(N, dtype=torch.int64)
before = rss()
y = memtool.yield_memory()
after = rss()
# Between the two readings the interpreter itself may touch a page or two of its
# own (the answer's objects): 64 KiB of slack for those, none for the storage.
print("yield", y.ok, y.changed, y.bytes, y.allocations, before - after >= y.bytes - 65536)
print("again", memtool.yield_memory().message)
r = memtool.restore()
print("restore", r.ok, r.bytes, r.allocations)
print("intact", bool((x == torch.arange(N, dtype=torch.int64)).all()))
print("restore again", memtool.restore().message)
