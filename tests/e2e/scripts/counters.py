# memtool.allocated(), freed(), current(), peak() and top_sites() (MemLord's
# questions) asked from inside: three 1,000,000-byte storages kept (line 9, in
# make()), one of 2,000,000 bytes made and freed (line 11).
import torch

import memtool


def make():
    return torch.empty(1_000_000, dtype=torch.uint8)


kept = [make() for _ in range(3)]
tmp = torch.empty(2_000_000, dtype=torch.uint8)
del tmp
print(memtool.allocated("cpu"), memtool.freed("cpu"), memtool.current(torch.device("cpu")))
print(memtool.peak(), memtool.allocated("cuda").bytes)
for site in memtool.top_sites("cpu", n=2):
    print(tuple(site))
print([s.site for s in memtool.top_sites(by="freed")])
print([s.live_bytes for s in memtool.top_sites(by="live")])
for bad in ({"device": "gpu"}, {"by": "peak"}, {"n": 0}):
    try:
        memtool.top_sites(**bad)
    except ValueError as e:
        print("refused:", e)
