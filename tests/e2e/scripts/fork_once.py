# The parent holds 3,000,000 bytes and forks one child that allocates 5,000,000
# bytes and exits: a trace of two processes (the HTML report's overview).
import os

import torch

kept = torch.empty(3_000_000, dtype=torch.uint8)
pid = os.fork()
if pid == 0:
    child = torch.empty(5_000_000, dtype=torch.uint8)
    os._exit(0)
os.waitpid(pid, 0)
print("forked")
