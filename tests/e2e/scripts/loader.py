# A DataLoader with two forked workers: each item is a 1,000,000-byte storage made
# in a worker; each batch of two is collated into shared memory there (2,000,000
# bytes) and mapped by the main process.
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((250_000,), float(i))  # 250,000 float32: 1,000,000 bytes


if __name__ == "__main__":
    total = 0.0
    for batch in DataLoader(Items(), batch_size=2, num_workers=2):
        total += float(batch[:, 0].sum())
    print("sum", total)
