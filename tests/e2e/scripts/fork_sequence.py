# N fork children one after another, each allocating 1,000 bytes (250 float32)
# and exiting before the next starts: memtool run keeps every one of them until
# it writes the trace.
import os
import sys

import torch

n = int(sys.argv[1])
failed = 0
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        t = torch.ones(250)
        os._exit(0)
    failed += os.waitpid(pid, 0)[1] != 0
print("children", n, "failed", failed)
