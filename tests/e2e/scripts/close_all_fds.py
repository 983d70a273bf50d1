# Closes every descriptor from 3 up, three ways a daemon does (closefrom, then
# os.closerange, then os.close on each one /proc/self/fd lists), allocating
# between them, and then uses descriptors of its own.
import ctypes
import errno
import os

import torch

libc = ctypes.CDLL(None, use_errno=True)
a = torch.empty(1_000_000, dtype=torch.uint8)
libc.closefrom(3)
b = torch.empty(2_000_000, dtype=torch.uint8)
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
c = torch.empty(3_000_000, dtype=torch.uint8)
refused = 0
for name in os.listdir("/proc/self/fd"):
    if int(name) > 2:
        try:
            os.close(int(name))
        except OSError:
            refused += 1
d = torch.empty(4_000_000, dtype=torch.uint8)
r, w = os.pipe()
os.write(w, b"still works")
bad = libc.close_range(10, 5, 0)  # first past last: refused as the C library does
einval = ctypes.get_errno() == errno.EINVAL
print(os.read(r, 100).decode(), "refused", refused, "bad range", bad, einval, flush=True)
