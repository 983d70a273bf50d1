# Closes every socket it did not open itself (memtool's among them) and gets the
# number back for a socketpair of its own: nothing of memtool's may arrive on it.
import ctypes
import os
import socket
import stat

import torch

a = torch.empty(1_000_000, dtype=torch.uint8)
taken = []
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            taken.append(fd)
    except OSError:
        pass
ours, theirs = socket.socketpair()
for fd in taken:
    os.close(fd)
    os.dup2(ours.fileno(), fd)  # the number is the program's own socket now
b = torch.empty(2_000_000, dtype=torch.uint8)
del a
ctypes.CDLL(None).memtool_flush()  # the collector writes what it holds now, or finds it cannot
theirs.setblocking(False)
try:
    got = theirs.recv(65536)
except BlockingIOError:
    got = b""
print("stolen sockets", len(taken), "bytes received", len(got))
