# A single-threaded program that allocates, then blocks inside C (opening a FIFO no
# one writes yet); with argv[2] == "thread", it first starts a thread of its own
# that waits on an event. Prints "ready PID" first, "done" last.
#   quiet_main.py FIFO [thread]
import os
import sys
import threading

# Single-threaded on every torch: pip's numpy (OpenBLAS) starts a thread pool when
# torch imports it, and pip's torch 2.x a GNU OpenMP team at the first op over 32,768
# elements; Debian's numpy and torch 1.13 start neither here. Both read these first.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import torch  # noqa: E402

kept = torch.ones(250_000)  # 1,000,000 bytes
finished = threading.Event()
if len(sys.argv) > 2 and sys.argv[2] == "thread":
    threading.Thread(target=finished.wait).start()
print(f"ready {os.getpid()}", flush=True)
with open(sys.argv[1]) as f:
    f.read()
finished.set()
print("done", flush=True)
