# A program whose second thread is inside a torch op (the GIL released) when it is
# yielded (tests/e2e/CourtesyTest.cpp): it sorts a shuffled 32 MiB tensor, about a
# second an op, again and again, reading it and writing the result all the while;
# the main thread runs pure Python. memtool ctl parks the main thread; the worker
# runs on into memory the yield makes read-only, then takes. It must wait for
# restore and go on, and every sort must come out right.
#   courtesy_threads.py FLAG    ends after its current sort once FLAG exists
import os
import sys
import threading
import time

import torch

flag = sys.argv[1]
n = 8 << 20  # floats: exact below 2**24
torch.manual_seed(0)
shuffled = torch.randperm(n).float()
expected = torch.arange(n).float()
sorts = []


def worker():
    print("ready", os.getpid(), flush=True)  # then straight into the first sort
    while True:
        values, _ = shuffled.sort()
        sorts.append(bool(torch.equal(values, expected)))
        if os.path.exists(flag):
            break


t = threading.Thread(target=worker)
t.start()
# Python between any two bytecodes: a safe point. sleep(0) hands the GIL over each
# turn, so that the worker, which needs it after "ready" to start its sort, is
# inside the sort before the yield comes (with a loop that kept the GIL, the park
# could come first: then nothing touched the memory).
while t.is_alive():
    time.sleep(0)
print("sorts", len(sorts), "all right:", all(sorts), flush=True)
