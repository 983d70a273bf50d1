# A program memtool did not start that declares a region once memtool attach came:
# on SIGUSR1 it fills a 1,000,000-byte storage with 7s inside memtool.region("kv",
# backup="disk") and says "region"; SIGUSR2 ends it, printing the storage's sum.
import os
import signal
import time

import torch

asked = {"go": 0, "stop": False}
signal.signal(signal.SIGUSR1, lambda *_: asked.update(go=asked["go"] + 1))
signal.signal(signal.SIGUSR2, lambda *_: asked.update(stop=True))
print("ready", os.getpid(), flush=True)
held = []
while not asked["stop"]:
    if asked["go"] > len(held):
        import memtool

        with memtool.region("kv", backup="disk"):
            held.append(torch.full((1_000_000,), 7, dtype=torch.uint8))
        print("region", memtool.enabled, flush=True)
    time.sleep(0.002)
print("sum", int(held[0].sum()) if held else None, flush=True)
