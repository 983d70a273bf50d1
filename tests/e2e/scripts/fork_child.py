# Forks while another thread allocates; the child allocates too, then exits. The
# parent's trace must hold exactly the parent's storages, verified.
import os
import threading

import torch

stop = threading.Event()


def churn():
    while not stop.is_set():
        t = torch.empty(1000, dtype=torch.uint8)  # 1,000 bytes, freed at once
        del t


worker = threading.Thread(target=churn)
worker.start()
kept = torch.empty(3_000_000, dtype=torch.uint8)  # the parent's one live storage
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        child = torch.empty(5_000_000, dtype=torch.uint8)  # never in the parent's trace
        os._exit(0 if child.numel() == 5_000_000 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
stop.set()
worker.join()
print("forked 20 children")
