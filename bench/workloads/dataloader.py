"""Real program: a DataLoader with two worker processes feeding a small CNN's
training loop. The workers are forked, and memtool records each as a process of
the run.
Usage: dataloader.py [BATCHES] [BATCH]"""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    """Synthetic images with a little per-sample work, as a decoding transform would do."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        image = torch.rand(3, 64, 64, generator=g)
        image = (image - image.mean()) / (image.std() + 1e-6)
        return image, i % 10


def train(batches, batch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(batches * batch), batch_size=batch, num_workers=2)
    seen = 0
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        seen += len(y)
    return seen


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]] + [40, 32][len(sys.argv) - 1:]
    print(train(*args[:2]))
