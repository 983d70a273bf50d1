"""Real program: resnet18 (torchvision) training steps on random images, SGD.
Usage: resnet18.py [STEPS] [BATCH] [SIZE]"""
import sys

import torch
import torchvision


def train(steps, batch, size):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        x = torch.randn(batch, 3, size, size)
        y = torch.randint(0, 10, (batch,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return float(loss)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]] + [4, 16, 128][len(sys.argv) - 1:]
    print(train(*args[:3]))
