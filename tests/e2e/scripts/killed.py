import os
import signal

import torch

a = torch.empty(3_000_000, dtype=torch.uint8)
os.kill(os.getpid(), signal.SIGKILL)
