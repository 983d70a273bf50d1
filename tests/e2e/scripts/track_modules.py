# Two tracked blocks of one forward and backward: the first with modules=True
# (each nn.Module instance named), the second without (named by nothing: the
# first's hooks went when its block ended). Traces: ARGV[1] + "0.json", "1.json".
import sys

import torch
import torch.nn.modules.module as module_module
from torch import nn

import memtool

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1000, 500), nn.ReLU(), nn.Linear(500, 10))
x = torch.randn(200, 1000)
for i in range(2):
    with memtool.track(f"{sys.argv[1]}{i}.json", modules=(i == 0)):
        model(x).sum().backward()
print("hooks left", len(module_module._global_forward_pre_hooks), len(module_module._global_forward_hooks))
