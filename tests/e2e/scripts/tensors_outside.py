# Tensors whose memory memtool did not see allocated in this process: numpy's
# (torch.from_numpy), and in a fork child its parent's from before the fork.
import os

import numpy as np
import torch

import memtool

# One intra-op thread, as Debian's torch 1.13 runs here: pip's torch 2.x parallelizes
# torch.ones with GNU OpenMP (libgomp), which is not fork-safe, and the child's first
# parallel op would wait forever for the parent's thread team.
torch.set_num_threads(1)
a = torch.ones(1_000_000)  # 4,000,000 B through torch's allocator
n = torch.from_numpy(np.zeros(250_000, dtype=np.float32))  # 1,000,000 B of numpy's
memtool.report_tensors()
pid = os.fork()
if pid == 0:
    b = torch.ones(500_000)  # the child's own: 2,000,000 B
    memtool.report_tensors()
    os._exit(0)
os.waitpid(pid, 0)
