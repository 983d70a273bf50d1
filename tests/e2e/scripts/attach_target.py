# A program memtool did not start, for memtool attach: it holds a 3,000,000-byte
# storage from before any attach, and on each SIGUSR1 allocates five
# 1,000,000-byte storages (line 21) and prints the bytes it holds of them; the
# first also frees a 2,000,000-byte storage from before. SIGUSR2 ends it (code 3).
import os
import signal
import sys

# Blocked before torch starts any thread: every thread inherits the mask, so that
# the signals wait for sigwait (one a thread left them open to would end the
# program, their default).
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})

import torch  # noqa: E402
kept = torch.empty(3_000_000, dtype=torch.uint8)  # from before the attach, kept
before = torch.empty(2_000_000, dtype=torch.uint8)  # from before, freed while attached
print("ready", os.getpid(), flush=True)


def allocate():
    return [torch.empty(1_000_000, dtype=torch.uint8) for _ in range(5)]  # line 21


held = []
while signal.sigwait({signal.SIGUSR1, signal.SIGUSR2}) == signal.SIGUSR1:
    before = None
    held += allocate()
    print("allocated", sum(t.numel() for t in held), flush=True)
print("done", flush=True)
sys.exit(3)
