# A small model's training step, for comparing native stacks: convolutions, batch
# norm, an LSTM and Adam reach the allocator through many different paths.
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # every allocation on this thread: the same stacks each run
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 16 * 16, 64),
)
lstm = nn.LSTM(64, 32, batch_first=True)
opt = torch.optim.Adam(list(model.parameters()) + list(lstm.parameters()))


def step():
    features = model(torch.randn(4, 3, 32, 32))
    out, _ = lstm(features.view(2, 2, 64))
    out.sum().backward()
    opt.step()
    opt.zero_grad()


for _ in range(2):
    step()
