# Storages in shared memory: share_memory_() moves a storage there (its CPU
# storage is freed), in both of torch's sharing strategies; a forked child that
# gets one through a queue maps it without counting it.
import multiprocessing
import sys

import torch
import torch.multiprocessing as mp


def reader(queue, done):
    t = queue.get()
    done.put(int(t[0]) + t.numel())


if __name__ == "__main__":
    strategy = sys.argv[1]  # file_descriptor or file_system
    mp.set_sharing_strategy(strategy)
    a = torch.zeros(3_000_000, dtype=torch.uint8)
    a.share_memory_()
    ctx = mp.get_context("fork")
    queue, done = ctx.SimpleQueue(), ctx.SimpleQueue()
    child = ctx.Process(target=reader, args=(queue, done))
    child.start()
    queue.put(a)
    print("child saw", done.get())
    child.join()
    del a
    print("exit", child.exitcode)
