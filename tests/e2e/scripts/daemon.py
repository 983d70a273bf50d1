# Starts a daemon (double fork, new session) that allocates and then runs on
# until argv[1], a FIFO, is written to; the program itself exits as soon as the
# daemon has allocated (its stream is then open: its collector connected at once).
import os
import sys

import torch

ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # As a daemon does: its output is not the program's (the test reads that to its end).
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        kept = torch.ones(1000)  # 4,000 bytes
        os.write(ready_w, b"r")
        with open(sys.argv[1]) as fifo:  # blocks until the test writes
            fifo.read()
        os._exit(0)
    os._exit(0)
os.close(ready_w)
os.wait()
os.read(ready_r, 1)
print("program exits")
