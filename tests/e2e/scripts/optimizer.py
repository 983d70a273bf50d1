# One training step of a Linear layer with Adam: its state tensors are made
# inside torch's optimizer wrappers.
import torch
from torch import nn

model = nn.Linear(1000, 500)  # 2,000,000 + 2,000 bytes of parameters
opt = torch.optim.Adam(model.parameters())


def train():
    loss = model(torch.ones(8, 1000)).sum()
    loss.backward()
    opt.step()  # line 13: exp_avg and exp_avg_sq, 2 x 2,002,000 bytes


train()
