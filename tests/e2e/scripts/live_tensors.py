# pytorch_memlab's MemReporter examples, for memtool's tensors report
# (LiveInsightTest.cpp): a Linear(1024, 1024) and a 512x1024 input that needs a
# gradient; two Linear(16, 16) sharing one weight; a two-layer LSTM. While the
# graph of `linear(inp * (inp + 2))` is alive, autograd holds its two 2 MiB
# temporaries, which no Python code can reach (torch preserves their Python
# objects, but only torch refers to them). At two known points the program says
# "ready N PID" and waits in pure Python for FLAG_DIR/N, so that
# `memtool ctl PID tensors` finds it at a safe point with nothing allocated
# meanwhile:
#   1. before backward: the parameters, inp, out, and the graph's temporaries;
#   2. after backward (the graph freed, the gradients made): it also reports
#      itself with memtool.report_tensors(linear) and writes memtool.snapshot().
#   live_tensors.py FLAG_DIR SNAPSHOT_PATH
import os
import sys

import torch

import memtool

flag_dir, snapshot_path = sys.argv[1], sys.argv[2]


def wait(n):
    # The first "ready" goes to stdout; later ones to FLAG_DIR/ready when the test
    # made it a FIFO (its reader waits there while our stdout is not read yet).
    line = f"ready {n} {os.getpid()}\n"
    fifo = os.path.join(flag_dir, "ready")
    if n > 1 and os.path.exists(fifo):
        with open(fifo, "w") as f:
            f.write(line)
    else:
        print(line, end="", flush=True)
    while not os.path.exists(os.path.join(flag_dir, str(n))):
        pass


linear = torch.nn.Linear(1024, 1024)
shared = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
shared[1].weight = shared[0].weight
lstm = torch.nn.LSTM(10, 20, 2)
inp = torch.zeros(512, 1024, requires_grad=True)
out = linear(inp * (inp + 2)).mean()  # the graph's line
wait(1)
out.backward()
del out
memtool.report_tensors(linear)
memtool.snapshot(snapshot_path)
wait(2)
print("done", flush=True)
