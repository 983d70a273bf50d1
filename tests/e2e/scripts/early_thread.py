# A thread started before libc10 is loaded (before `import torch`, in a real
# program) that allocates afterwards: its Python frames are recorded all the same.
# ctypes releases the GIL around the call, as torch's ops do. Prints whether a
# profile hook was left for threads (memtool reads frames without one).
# Usage: early_thread.py [LIBC10]
import ctypes
import sys
import threading

go = threading.Event()
c10 = {}


def early_worker():
    go.wait()
    p = c10["alloc"](3_000_000)  # line 16: on a thread older than memtool's start
    c10["free"](p)


thread = threading.Thread(target=early_worker)
thread.start()
lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libc10.so")
c10["alloc"] = lib._ZN3c109alloc_cpuEm  # c10::alloc_cpu(unsigned long)
c10["alloc"].restype = ctypes.c_void_p
c10["alloc"].argtypes = [ctypes.c_size_t]
c10["free"] = lib._ZN3c108free_cpuEPv  # c10::free_cpu(void*)
c10["free"].argtypes = [ctypes.c_void_p]
go.set()
thread.join()
print("profile hook", "none" if threading._profile_hook is None else "set")
