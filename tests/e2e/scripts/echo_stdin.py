import os
import sys

import torch

t = torch.empty(10, dtype=torch.uint8)
print(sys.stdin.read().upper(), end="")
print("LD_PRELOAD=" + os.environ.get("LD_PRELOAD", ""), file=sys.stderr)
