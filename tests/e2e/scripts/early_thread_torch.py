# A thread started before `import torch` that allocates afterwards, inside a torch
# op (which releases the GIL): its Python frames are recorded all the same.
import threading

go = threading.Event()
box = []


def early_worker():
    go.wait()
    box.append(torch.empty(5_000_000, dtype=torch.uint8))  # line 11


thread = threading.Thread(target=early_worker)
thread.start()
import torch  # noqa: E402  (the point: after the thread started)

go.set()
thread.join()
box.clear()
