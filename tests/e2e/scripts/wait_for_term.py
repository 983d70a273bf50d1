# Prints "ready" once its SIGTERM handler is in place, then waits for the signal.
import signal
import sys

import torch

keep = torch.empty(1000, dtype=torch.uint8)


def on_term(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(7)


signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
signal.pause()
