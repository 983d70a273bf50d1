# Starts a daemon (double fork, new session) that allocates and then runs on
# until argv[1], a FIFO, is written to; the program itself exits at once.
import os
import sys

import torch

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # As a daemon does: its output is not the program's (the test reads that to its end).
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        kept = torch.ones(1000)  # 4,000 bytes
        with open(sys.argv[1]) as fifo:  # blocks until the test writes
            fifo.read()
        os._exit(0)
    os._exit(0)
os.wait()
print("program exits")
