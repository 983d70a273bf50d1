# Children started with environments of the program's own making, each
# allocating its own number of bytes: a subprocess given env={...}, `env -i`,
# a posix_spawn whose LD_PRELOAD and PYTHONPATH are its own, and last an exec
# after the program cleared its environment. Each child prints its size and the
# entries of LD_PRELOAD and PYTHONPATH after the first (memtool's, when there).
import os
import subprocess
import sys

import torch

CHILD = (
    "import os, sys, torch\n"
    "a = torch.empty(int(sys.argv[1]), dtype=torch.uint8)\n"
    "rest = lambda name: os.environ.get(name, '').split(':')[1:]\n"
    "print(sys.argv[1], rest('LD_PRELOAD'), rest('PYTHONPATH'), flush=True)\n"
)
a = torch.empty(1000, dtype=torch.uint8)
subprocess.run([sys.executable, "-c", CHILD, "2000"], env={"PATH": "/usr/bin"}, check=True)
subprocess.run(["env", "-i", sys.executable, "-c", CHILD, "3000"], check=True)
pid = os.posix_spawn(
    sys.executable,
    [sys.executable, "-c", CHILD, "4000"],
    {"LD_PRELOAD": "libc.so.6", "PYTHONPATH": "/nonexistent"},
)
os.waitpid(pid, 0)
os.environ.clear()
os.execv(sys.executable, [sys.executable, "-c", CHILD, "5000"])
