# A region paused with its content on disk (an unnamed file: only a descriptor
# holds it), then every descriptor from 3 up closed, as a daemon does: the resume
# reads the content back whole.
import os

import memtool
import torch

with memtool.region("weights", backup="disk"):
    w = torch.arange(1_000_000, dtype=torch.int64)
r = memtool.pause("weights")
print("pause", r.ok, r.bytes)
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
r = memtool.resume("weights")
print("resume", r.ok, r.bytes)
print("intact", bool((w == torch.arange(1_000_000, dtype=torch.int64)).all()))
