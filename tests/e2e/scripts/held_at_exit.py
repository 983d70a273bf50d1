# A storage a module global holds to the end (held at exit, not leaked) and one
# that only a reference cycle keeps, the garbage collector off (leaked).
import gc

import torch

gc.disable()
kept = torch.empty(3_000_000, dtype=torch.uint8)  # line 8


def lose():
    cycle = [torch.empty(2_000_000, dtype=torch.uint8)]  # line 12
    cycle.append(cycle)


lose()
print("kept", kept.numel())
