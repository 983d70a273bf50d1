# Two fork children: the first forked allocates 1,000,000 bytes, the second
# 2,000,000. argv[1] says which allocates (and so connects to memtool) first:
# "first" or "second". Each waits for its turn on a pipe.
import os
import sys

import torch

a = torch.empty(100, dtype=torch.uint8)
done_r, done_w = os.pipe()


def child(go, size):
    os.read(go, 1)
    b = torch.empty(size, dtype=torch.uint8)
    os.write(done_w, b"x")
    os._exit(0)


go = []
pids = []
for size in (1_000_000, 2_000_000):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(r, size)
    go.append(w)
    pids.append(pid)
for w in go if sys.argv[1] == "first" else reversed(go):
    os.write(w, b"g")
    os.read(done_r, 1)  # it has allocated before the other may
for pid in pids:
    os.waitpid(pid, 0)
print("ok")
