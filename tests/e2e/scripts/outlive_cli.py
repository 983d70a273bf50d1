# Prints "ready <pid>", waits for SIGUSR1 (the test kills memtool first), then
# allocates past the collector's flush threshold and exits normally.
import os
import signal

import torch

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", os.getpid(), flush=True)
signal.sigwait({signal.SIGUSR1})
kept = [torch.empty(64) for _ in range(50_000)]  # ~1 MB of records: the stream must be written
print("survived", len(kept), flush=True)
