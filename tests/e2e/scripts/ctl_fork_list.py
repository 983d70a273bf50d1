# A forked worker beside its parent under memtool run, both with a stream of their
# own (tests/e2e/CtlFaultsTest.cpp: `memtool ctl list` shows whole commands and
# marks the worker forked). Prints "ready PARENT CHILD" once the child's stream is
# admitted; both end once FLAG exists.
#   ctl_fork_list.py FLAG [WORDS...]    WORDS: only to make the command line long
import os
import sys
import time

import torch

torch.set_num_threads(1)  # pip's torch: its OpenMP team is not fork-safe
flag = sys.argv[1]


def wait_for_flag():
    while not os.path.exists(flag):
        time.sleep(0.01)


a = torch.ones(1 << 20)  # the parent's stream
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    b = torch.ones(1 << 20)  # the child's stream: admitted before this returns
    os.write(w, b"x")
    os.close(w)
    wait_for_flag()
    os._exit(0)
os.close(w)
os.read(r, 1)
print("ready", os.getpid(), pid, flush=True)
wait_for_flag()
os.waitpid(pid, 0)
