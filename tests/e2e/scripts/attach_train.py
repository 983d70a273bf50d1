# resnet18 trained from a fixed seed, each step's loss printed exactly (repr):
# memtool attach comes and goes while it runs, and no loss may change. After the
# last step it waits for its stdin to end, so that the test decides when it exits.
import os
import sys

import torch
import torchvision

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(0)
torch.set_num_threads(2)
model = torchvision.models.resnet18(num_classes=10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.randn(4, 3, 64, 64)
labels = torch.randint(0, 10, (4,))
print("ready", os.getpid(), flush=True)
for step in range(steps):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    print("step", step, repr(loss.item()), flush=True)
sys.stdin.read()
print("done", flush=True)
