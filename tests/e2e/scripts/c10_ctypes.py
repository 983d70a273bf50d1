# CPU storages without torch: libc10's allocator called through ctypes, so any
# Python version can be profiled (ctypes releases the GIL around each call, as
# torch's ops do). Usage: c10_ctypes.py [LIBC10]
import ctypes
import sys
import threading

c10 = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libc10.so")
alloc_cpu = c10._ZN3c109alloc_cpuEm  # c10::alloc_cpu(unsigned long)
alloc_cpu.restype = ctypes.c_void_p
alloc_cpu.argtypes = [ctypes.c_size_t]
free_cpu = c10._ZN3c108free_cpuEPv  # c10::free_cpu(void*)
free_cpu.argtypes = [ctypes.c_void_p]


def inner():
    return alloc_cpu(8_000_000)  # line 17


def outer():
    held = alloc_cpu(4_000_000)  # line 21
    p = inner()  # line 22: peaks at 12,000,000
    free_cpu(p)
    free_cpu(held)


def worker():
    free_cpu(alloc_cpu(1_000_000))  # line 28: on a threading.Thread


outer()  # line 31
t = threading.Thread(target=worker)
t.start()
t.join()
print("ok")
