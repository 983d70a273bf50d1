#!/usr/bin/env python3
"""What pinning host memory costs (a first host-backed pause is mostly this): 1 GiB
pinned three ways, each twice, with the seconds and the device memory it took (the
driver's page tables for it):

  cuMemHostAlloc                        what memtool's host backups used to do
  mmap + touch + cuMemHostRegister      with 4 KiB pages
  the same after madvise(MADV_HUGEPAGE) what they do now (2 MiB pages where THP allows)

Needs a GPU and a CUDA torch:  python3 bench/pin_host.py [--gib 1]
"""
import argparse
import ctypes
import time

import torch

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--gib", type=int, default=1)
size = ap.parse_args().gib << 30
torch.empty(1, device="cuda")  # a context
cu = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
PROT_RW, MAP_PRIVATE_ANON, MADV_HUGEPAGE, PORTABLE = 3, 0x22, 14, 1


def host_alloc():
    p = ctypes.c_void_p()
    assert cu.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(size), PORTABLE) == 0
    return lambda: cu.cuMemFreeHost(p)


def register(huge):
    p = libc.mmap(None, size, PROT_RW, MAP_PRIVATE_ANON, -1, 0)
    if huge:
        libc.madvise(ctypes.c_void_p(p), ctypes.c_size_t(size), MADV_HUGEPAGE)
    ctypes.memset(p, 0, size)
    assert cu.cuMemHostRegister_v2(ctypes.c_void_p(p), ctypes.c_size_t(size), PORTABLE) == 0
    return lambda: (cu.cuMemHostUnregister(ctypes.c_void_p(p)), libc.munmap(ctypes.c_void_p(p), ctypes.c_size_t(size)))


with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
    print("transparent huge pages:", f.read().strip())
for name, pin in (("cuMemHostAlloc", host_alloc), ("register, 4 KiB pages", lambda: register(False)),
                  ("register, MADV_HUGEPAGE", lambda: register(True))):
    for _ in range(2):
        free0 = torch.cuda.mem_get_info()[0]
        start = time.perf_counter()
        unpin = pin()
        seconds = time.perf_counter() - start
        taken = free0 - torch.cuda.mem_get_info()[0]
        unpin()
        print(f"{name:24} {seconds:.3f} s for {size >> 30} GiB, the device's free memory {-taken:+,} B")
