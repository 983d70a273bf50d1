# Holds a storage, then execs: first an exec that fails (the process goes on,
# and so does its stream), then the real one, into exec_target.py.
import os
import sys

import torch

held = torch.empty(2_000_000, dtype=torch.uint8)  # goes with the image
try:
    os.execv("/nonexistent/program", ["nothing"])
except OSError:
    pass
after = torch.empty(500_000, dtype=torch.uint8)
target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exec_target.py")
os.execv(sys.executable, [sys.executable, target])
