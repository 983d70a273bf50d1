# Regions, pause and resume, and memtool ctl inside a track, as under memtool run.
import os
import subprocess
import sys

import torch

import memtool

with memtool.track(sys.argv[1]):
    with memtool.region("weights", backup="disk"):
        w = torch.full((1_000_000,), 7, dtype=torch.uint8)  # line 12
    paused = memtool.pause("weights")
    resumed = memtool.resume("weights")
    print("paused", paused.bytes, "resumed", resumed.bytes, "value", int(w[123]))
    status = subprocess.run([os.environ["MEMTOOL_BIN"], "ctl", str(os.getpid()), "status"],
                            capture_output=True, text=True)
    print("ctl", status.returncode, "weights" in status.stdout)
    del w
