# A program memtool did not start whose main thread runs Python all along (a loop
# with short sleeps, as a server's or a training's would): memtool ctl's commands
# that need the interpreter (tensors) are answered there. It holds a
# 3,000,000-byte tensor from before any attach; each SIGUSR1 makes it allocate
# five 1,000,000-byte tensors (line 25); SIGUSR2 ends it (code 3).
import os
import signal
import sys
import time

import torch

kept = torch.empty(3_000_000, dtype=torch.uint8)  # from before the attach
asked = {"rounds": 0, "stop": False}
signal.signal(signal.SIGUSR1, lambda *_: asked.update(rounds=asked["rounds"] + 1))
signal.signal(signal.SIGUSR2, lambda *_: asked.update(stop=True))
print("ready", os.getpid(), flush=True)
held = []
done = 0


def allocate():
    return [torch.empty(1_000_000, dtype=torch.uint8) for _ in range(5)]


while not asked["stop"]:
    if asked["rounds"] > done:
        done += 1
        held += allocate()
        print("allocated", sum(t.numel() for t in held), flush=True)
    time.sleep(0.002)
print("done", flush=True)
sys.exit(3)
