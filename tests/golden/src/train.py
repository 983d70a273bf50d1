# The program behind traces/train.json (a fixture written by hand: its
# line rows point here). The baseline trace is the same program with batches
# of 2 MiB.
import torch


def make_batch(n):
    return torch.empty(n << 20, dtype=torch.uint8)


# One step: a batch, then the gradients, kept by the caller.
def train_step(n):
    batch = make_batch(n)
    grads = torch.empty(2 << 20, dtype=torch.uint8)
    del batch
    return grads


weights = torch.empty(4 << 20, dtype=torch.uint8)
for step in range(2):
    g = train_step(3)
summary = torch.empty(1 << 20, dtype=torch.uint8)
