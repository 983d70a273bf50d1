# A main thread that runs only Python: no op, no I/O, nothing that releases the
# GIL, until SIGUSR1 says stop. Before 3.13 such a thread never saw a pending call
# asked from another thread (the eval breaker was not set for it).
import os
import signal

import torch

weights = torch.ones(250_000)  # 1,000,000 bytes
stop = False


def on_usr1(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGUSR1, on_usr1)
print("ready", os.getpid(), flush=True)
n = 0
while not stop:
    n += 1
print("done", flush=True)
