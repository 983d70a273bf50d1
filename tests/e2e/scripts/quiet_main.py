# A single-threaded program that allocates, then blocks inside C (opening a FIFO no
# one writes yet); with argv[2] == "thread", it first starts a thread of its own
# that waits on an event. Prints "ready PID" first, "done" last.
#   quiet_main.py FIFO [thread]
import os
import sys
import threading

import torch

kept = torch.ones(250_000)  # 1,000,000 bytes
finished = threading.Event()
if len(sys.argv) > 2 and sys.argv[2] == "thread":
    threading.Thread(target=finished.wait).start()
print(f"ready {os.getpid()}", flush=True)
with open(sys.argv[1]) as f:
    f.read()
finished.set()
print("done", flush=True)
