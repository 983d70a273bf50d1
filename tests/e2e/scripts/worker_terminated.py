# Two workers ended with SIGTERM by their parent, as multiprocessing's Pool ends
# its workers when it closes (there the worker may also see its sentinel first:
# here each waits until it is terminated). Worker i allocates (i + 1) MB first.
import multiprocessing as mp

import torch


def work(i, ready, never):
    t = torch.zeros(250000 * (i + 1))
    ready.put(t.numel())
    never.wait()


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ready, never = ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=work, args=(i, ready, never)) for i in range(2)]
    for w in workers:
        w.start()
    total = ready.get() + ready.get()
    for w in workers:
        w.terminate()
        w.join()
    print(total, [w.exitcode for w in workers], flush=True)
