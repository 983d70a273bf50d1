# memtool.track(events=...): the block's events in a log beside its trace
# (EventsTest.cpp). A bad `events` is refused before anything starts.
import sys

import torch

import memtool

try:
    memtool.track(sys.argv[1], events=0)
except ValueError as e:
    print(e)
with memtool.track(sys.argv[1], events=100) as t:
    x = torch.empty(3_000_000, dtype=torch.uint8)  # line 14
    del x
    y = torch.empty(2_000_000, dtype=torch.uint8)  # line 16
print(t.report("--bytes", "exact", "--events-before", "3").splitlines()[-4:])
