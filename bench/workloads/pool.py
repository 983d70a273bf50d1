"""Real program shape: a fork pool of worker processes, each doing torch work on
its share of the tasks (feature extraction, preprocessing). Every worker is a
process of the run, with the same libraries mapped: what memtool run spends per
process, beside what the program spends.
Usage: pool.py [WORKERS] [TASKS] [SIZE]"""
import multiprocessing as mp
import sys

import torch


def task(i, size):
    g = torch.Generator().manual_seed(i)
    x = torch.rand(size, size, generator=g)
    for _ in range(4):
        x = torch.tanh(x @ x.t() / size)
    return float(x.sum())


def run(i):
    return task(i, SIZE)


if __name__ == "__main__":
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    torch.set_num_threads(1)
    with mp.get_context("fork").Pool(workers) as pool:
        total = sum(pool.map(run, range(tasks)))
    print(f"pool: {workers} workers, {tasks} tasks, sum {total:.3f}")
