# Two blocks of nn.Linear and ReLU, a forward and a backward: under
# `memtool run --modules` each allocation is named by the module instance it
# happened in, the backward's by the module whose forward made the node.
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, width_in, width_out):
        super().__init__()
        self.fc = nn.Linear(width_in, width_out)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


model = nn.Sequential(Block(1000, 500), Block(500, 250), nn.Linear(250, 10))
x = torch.randn(200, 1000)  # 800,000 B, no module's
out = model(x)
loss = out.sum()
loss.backward()
print("loss", out.shape[0], out.shape[1])
