# Storages a global list holds until the interpreter shuts down: held at exit (the
# globals still reach them), not leaked; the interpreter's teardown frees them.
import torch

kept = []
kept.append(torch.empty(1_000_000, dtype=torch.uint8))  # line 6


def step():
    scratch = torch.empty(2_000_000, dtype=torch.uint8)  # line 10: freed on return
    kept.append(torch.empty(500_000, dtype=torch.uint8))  # line 11
    return int(scratch.numel())


step()
print("kept", sum(t.numel() for t in kept))
