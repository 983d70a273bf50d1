# A DataLoader with two forked workers. Each item is made in a worker from its
# own seeded generator, a different size for each index, so that each worker's
# figures are its own (worker 0 gets the batches of items 0-1 and 4-5, worker 1
# those of 2-3 and 6-7); batches are collated into shared memory there (not
# c10::alloc_cpu) and summed in the main process.
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(1000 + 100 * i, generator=g)
        return (x * 2)[:1000]


if __name__ == "__main__":
    torch.manual_seed(0)  # the loader's base seed comes from here
    torch.set_num_threads(1)
    total = 0.0
    for batch in DataLoader(Items(), batch_size=2, num_workers=2):
        total += float((batch + 1).sum())
    print("sum", total)
