# A child that starts using torch only after its parent has exited: it waits on a
# pipe whose write end only the parent holds, which closes when the parent exits.
# memtool run must wait for it (it was left running, adopted by memtool), take its
# stream, and reap it.
import os
import subprocess
import sys

if len(sys.argv) > 1:
    os.read(int(sys.argv[1]), 1)  # EOF: the parent is gone
    import torch

    x = torch.zeros(250000)
    sys.exit(3)

r, w = os.pipe()
subprocess.Popen([sys.executable, __file__, str(r)], pass_fds=(r,))
os.close(r)
import torch  # noqa: E402

y = torch.zeros(500000)
print("parent done", flush=True)
