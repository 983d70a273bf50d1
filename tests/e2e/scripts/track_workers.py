# A thread started before the block and DataLoader workers forked inside it.
import sys
import threading

import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.ones(250_000, dtype=torch.uint8)  # line 14


import memtool  # noqa: E402

start, allocated, finish = threading.Event(), threading.Event(), threading.Event()


def work():
    start.wait()
    y = torch.empty(2_000_000, dtype=torch.uint8)  # line 24: on a thread older than the block
    allocated.set()
    finish.wait()
    del y


thread = threading.Thread(target=work)
thread.start()
with memtool.track(sys.argv[1]):
    start.set()
    allocated.wait()
    total = sum(batch.numel() for batch in DataLoader(Items(), batch_size=2, num_workers=2))
    finish.set()
    thread.join()
print("total", total)
