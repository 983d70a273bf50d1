# For the live view's test: allocates (so the collector connects), waits for a line
# on the FIFO named first on the command line, then prints its stdin in capitals.
import sys

import torch

t = torch.empty(10, dtype=torch.uint8)
print("waiting", flush=True)
with open(sys.argv[1]) as go:
    go.readline()
print(sys.stdin.read().upper(), end="", flush=True)
