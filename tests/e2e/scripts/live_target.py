# For the live view's test: storages of known size, one of them in a pausable
# region that is paused, then "ready", then a wait for a line on the FIFO named
# first on the command line, then "released" and exit.
import sys

import memtool
import torch

a = torch.empty(3_000_000, dtype=torch.uint8)  # line 9: held while the view shows
with memtool.region("kv"):
    kv = torch.empty(1_000_000, dtype=torch.uint8)  # line 11: paused below
memtool.pause("kv")
print("ready", flush=True)
with open(sys.argv[1]) as go:
    go.readline()
print("released", flush=True)
