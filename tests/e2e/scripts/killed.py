# Killed by SIGKILL (as the kernel's OOM killer would kill it) right after six
# allocations: what its collector had not sent yet is read back by memtool run.
import os
import signal

import torch

a = torch.empty(3_000_000, dtype=torch.uint8)
kept = [torch.empty(100_000) for _ in range(5)]  # 400,000 bytes each
os.kill(os.getpid(), signal.SIGKILL)
