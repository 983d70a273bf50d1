# One rank of hold_launcher.py: holds SIZE bytes until its launcher says "free".
import sys

import torch

held = torch.empty(int(sys.argv[1]), dtype=torch.uint8)
print("held", flush=True)
sys.stdin.readline()
del held
