"""A fork child killed by SIGKILL (as the OOM killer would): its stream is cut
short, and only its parent, which reaps it with os.waitpid, learns how it ended."""
import os
import signal

import torch

kept = torch.empty(250)  # 1,000 bytes: the parent has a stream
pid = os.fork()
if pid == 0:
    held = torch.empty(500_000)  # 2,000,000 bytes, still in its collector's buffer
    os.kill(os.getpid(), signal.SIGKILL)
_, status = os.waitpid(pid, 0)
print("child killed by", os.WTERMSIG(status))
