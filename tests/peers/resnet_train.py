# torchvision's resnet18 built and trained for three steps on the CPU, all under
# torch.profiler (profile_memory=True) in every run, so that the program memtool,
# memray and the profiler's own run execute is the same one, and the profiler
# sees every storage of the process (importing torch and torchvision makes none).
# argv[1]: where to write the profiler's figures (peer_figures.profiler_figures).
import json
import sys

import torch
import torchvision
from peer_figures import profiler_figures


def step(model, opt, images, labels):
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()


def train():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(2, 3, 64, 64)
    labels = torch.tensor([1, 7])
    for _ in range(3):
        step(model, opt, images, labels)


torch.set_num_threads(1)  # one thread: every allocation in the same order each run
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
    train()
with open(sys.argv[1], "w") as out:
    json.dump(profiler_figures(prof), out)
