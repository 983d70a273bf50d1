# A DataLoader whose persistent worker, forked inside the block, outlives it: the
# block's end still comes (the worker holds none of the companion's pipes), and
# the worker, still streaming, is written as incomplete after wait_children.
import sys

import torch
from torch.utils.data import DataLoader

import memtool

data = [torch.ones(1000, dtype=torch.uint8) for _ in range(4)]
loader = DataLoader(data, batch_size=2, num_workers=1, persistent_workers=True)
with memtool.track(sys.argv[1], wait_children=0):
    total = sum(batch.numel() for batch in loader)
print("total", total)
