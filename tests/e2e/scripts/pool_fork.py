# A multiprocessing pool of two forked workers; each task allocates one storage.
# Both tasks meet at a barrier before returning, so each worker takes one (a
# worker that took none would make no allocation, and so no process of the trace).
import multiprocessing

import torch

barrier = None


def start(b):
    global barrier
    barrier = b


def work(n):
    t = torch.empty(n, dtype=torch.uint8)
    barrier.wait()
    return t.numel()


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(2, initializer=start, initargs=(ctx.Barrier(2),))
    print(sorted(pool.map(work, [1_000_000, 2_000_000], chunksize=1)))
    pool.close()
    pool.join()
