# Known sizes at known lines, for the event log's tests (EventsTest.cpp): after
# line 13 the live blocks of this file are 50,000,000 B (line 11) and 70,000,000 B
# (line 13), its peak. The pause puts the frees on a later tick of the clock the
# collector stamps them with (CLOCK_MONOTONIC_COARSE), so that a moment between
# them can be named.
import time

import torch

a = torch.empty(30_000_000, dtype=torch.uint8)
b = torch.empty(50_000_000, dtype=torch.uint8)
del a
c = torch.empty(70_000_000, dtype=torch.uint8)
time.sleep(0.05)
del b, c
