# A loop of temporaries fast enough for the collector to fold its events into
# Window records (tests/e2e/RunPythonTest.cpp runs it folded and not).
import torch

keep = []
for i in range(30_000):
    t = torch.empty(64)  # line 7: 256 bytes, freed at the next iteration
    if i % 1000 == 0:
        keep.append(torch.empty(1000))  # line 9: 4,000 bytes, 30 kept
big = torch.empty(1 << 20)  # line 10: 4 MiB, the peak
del big, t
