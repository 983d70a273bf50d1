# A multiprocessing pool of two forked workers; each task allocates one storage.
import multiprocessing

import torch


def work(n):
    t = torch.empty(n, dtype=torch.uint8)
    return t.numel()


if __name__ == "__main__":
    pool = multiprocessing.get_context("fork").Pool(2)
    print(sorted(pool.map(work, [1_000_000, 2_000_000], chunksize=1)))
    pool.close()
    pool.join()
