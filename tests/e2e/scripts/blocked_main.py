# The main thread blocks inside C (opening a FIFO that no one writes yet), so it
# reaches no safe point: `memtool ctl PID tensors` must give up with a clear
# message, not hang (LiveInsightTest.cpp). Prints "ready PID" first.
#   blocked_main.py FIFO
import os
import sys

import torch  # noqa: F401  (a program with tensors; none are needed)

print(f"ready {os.getpid()}", flush=True)
with open(sys.argv[1]) as f:
    f.read()
print("done", flush=True)
