# A test whose DataLoader forks its workers: they count in its figures.
import torch
from torch.utils.data import DataLoader


def test_workers():
    data = [torch.ones(250_000, dtype=torch.uint8) for _ in range(4)]  # line 7
    assert sum(b.numel() for b in DataLoader(data, batch_size=2, num_workers=2)) == 1_000_000
