"""A program memtool attach finds running: it says "ready PID", waits for a line
on stdin, then times N allocations and frees of a 64-float tensor and prints the
seconds. Usage: attach_loop.py N"""
import os
import sys
import time

import torch

n = int(sys.argv[1])
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
start = time.perf_counter()
for _ in range(n):
    x = torch.empty(64)
    del x
print(time.perf_counter() - start, flush=True)
