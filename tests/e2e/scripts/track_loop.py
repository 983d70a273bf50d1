# A hundred tracks in a loop leave no descriptor, thread or mapping behind.
import os
import sys

import torch

import memtool


def counts():
    with open("/proc/self/maps") as maps:
        return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")), sum(1 for _ in maps)


with memtool.track(sys.argv[1]):  # the first one loads the collector
    torch.empty(10)
first = counts()
for i in range(100):
    with memtool.track(sys.argv[1], native=False):
        x = torch.empty(1000 + i, dtype=torch.uint8)  # line 20
        del x
print("before", *first)
print("after", *counts())
