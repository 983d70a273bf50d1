# N fork children alive at once, each allocating 1,000 bytes' worth (250 float32),
# then all let go together: the CLI holds descriptors for every one of them.
# Prints the descriptor limit the program was given.
import os
import resource
import sys

import torch

n = int(sys.argv[1])
print("soft limit", resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)
r, w = os.pipe()
children = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        t = torch.ones(250)
        os.read(r, 1)  # until the parent closes its end: every child is alive at once
        os._exit(0)
    children.append(pid)
os.close(r)
os.close(w)
print("children", n, "failed", sum(os.waitpid(p, 0)[1] != 0 for p in children))
