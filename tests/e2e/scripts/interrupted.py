# Holds a known storage and waits for Ctrl-C (SIGINT), which it leaves unhandled:
# Python finalizes, then dies of the signal (it re-raises it).
import os
import signal

import torch

# Python's own handler, even where SIGINT was inherited ignored (a background job).
signal.signal(signal.SIGINT, signal.default_int_handler)
keep = torch.empty(1000, dtype=torch.uint8)
print("ready", os.getpid(), flush=True)
signal.pause()
