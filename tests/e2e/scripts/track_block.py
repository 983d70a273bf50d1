# memtool.track() around a block of a program memtool run did not start.
import sys

import torch

import memtool

before = torch.empty(1_000_000, dtype=torch.uint8)  # allocated before the block
with memtool.track(sys.argv[1]) as t:
    x = torch.empty(3_000_000, dtype=torch.uint8)  # line 10: live when the block ends
    del before  # an earlier block freed inside: counted apart
    y = torch.empty(500_000, dtype=torch.uint8)  # line 12: freed inside
    del y
    print("enabled", memtool.enabled)
after = torch.empty(2_000_000, dtype=torch.uint8)  # after the block: not in the trace
print("enabled", memtool.enabled)
print(t.report("--top", "1").splitlines()[1])
