# A forked child frees a storage it inherited and allocates its own; its stacks
# reach back into frames the parent entered before the fork.
import os

import torch

kept = torch.empty(3_000_000, dtype=torch.uint8)  # the parent's


def child():
    global kept
    mine = torch.empty(5_000_000, dtype=torch.uint8)
    del kept  # inherited: the parent's memory, not the child's to count
    more = torch.empty(1_000_000, dtype=torch.uint8)
    os._exit(7 if mine.numel() + more.numel() == 6_000_000 else 1)


def fork_here():
    pid = os.fork()
    if pid == 0:
        child()
    return pid


pid = fork_here()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
