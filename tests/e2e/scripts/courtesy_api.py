# memtool.yield_memory() / memtool.restore() from inside, under
# `memtool run --pausable all` (CourtesyTest.cpp): 64 MiB of int64 counting up,
# yielded to disk and restored, then checked.
import torch

import memtool

N = 64 * 2**20 // 8


def rss():
    """Anonymous resident bytes, where the storage lives. Not statm's resident
    count: that includes file pages, and the first read of the collector's own
    data can map a whole large folio of its .so at once (hundreds of KiB on Linux
    6.18, depending on how the page cache holds the file)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


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
