"""Ascend NPU memory in a region from Python, with no torch_npu: the Ascend
runtime (argv[1], the test double tests/fakes/FakeAscendCl.cpp) called through
ctypes, whose lookups (dlsym with the library's handle) memtool answers.

  npu_regions.py LIB api:  memtool.region(device="npu", backup="host") around an
      aclrtMallocAlign32 of 3,000,000 bytes, paused and resumed with its content.
  npu_regions.py LIB shim: the same through torch_memory_saver's API, one tag with
      a CPU backup and one without.
  npu_regions.py LIB pluggable: torch_npu's NPUPluggableAllocator callbacks
      (memtool_npu_malloc/free, the torch hook mode's) inside a region and outside.
  npu_regions.py LIB yield: a region of 3,000,000 bytes with no backup of its own
      yielded to host memory (memtool.yield_memory) and restored with its content.
"""
import ctypes
import sys

import memtool
from memtool.torch_memory_saver import torch_memory_saver

lib = ctypes.CDLL(sys.argv[1])
used = lib.fake_npu_used_bytes
used.restype = ctypes.c_size_t
assert lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0


def allocate(size):
    p = ctypes.c_void_p()
    rc = lib.aclrtMallocAlign32(ctypes.byref(p), ctypes.c_size_t(size), 0)
    assert rc == 0, rc
    return p.value


def fill(address, size, seed):
    ctypes.memmove(address, bytes((seed + i) % 256 for i in range(256)) * (size // 256), size // 256 * 256)


def same(address, size, seed):
    return ctypes.string_at(address, size // 256 * 256) == bytes((seed + i) % 256 for i in range(256)) * (size // 256)


before = used()
if sys.argv[2] == "api":
    with memtool.region("kv", backup="host", device="npu"):
        kv = allocate(3_000_000)
    fill(kv, 3_000_000, 7)
    held = used() - before
    paused = memtool.pause("kv")
    print("pause", paused.ok, paused.bytes, used() - before, held)
    print([(r.tag, r.device, r.state) for r in memtool.regions()])
    resumed = memtool.resume("kv")
    print("resume", resumed.ok, resumed.bytes, used() - before, same(kv, 3_000_000, 7))
    lib.aclrtFree(ctypes.c_void_p(kv))
    print("freed", used() - before)
elif sys.argv[2] == "pluggable":
    collector = ctypes.CDLL(memtool._collector_handle.path())
    collector.memtool_npu_malloc.restype = ctypes.c_void_p
    collector.memtool_npu_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    collector.memtool_npu_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    with memtool.region("kv", backup="host", device="npu"):
        inside = collector.memtool_npu_malloc(3_000_000, 0, None)
    outside = collector.memtool_npu_malloc(1_000_000, 0, None)
    fill(inside, 3_000_000, 9)
    print("allocated", used() - before, [(r.tag, r.bytes) for r in memtool.regions()])
    print("pause", memtool.pause("kv").bytes, used() - before)
    print("resume", memtool.resume("kv").bytes, same(inside, 3_000_000, 9))
    collector.memtool_npu_free(inside, 3_000_000, 0, None)
    collector.memtool_npu_free(outside, 1_000_000, 0, None)
    print("freed", used() - before)
elif sys.argv[2] == "yield":
    with memtool.region("kv", device="npu"):
        kv = allocate(3_000_000)
    fill(kv, 3_000_000, 5)
    yielded = memtool.yield_memory(to="host")
    print("yield", yielded.ok, yielded.bytes, used() - before)
    print(yielded.message)
    restored = memtool.restore()
    print("restore", restored.ok, restored.bytes, used() - before, same(kv, 3_000_000, 5))
else:
    with torch_memory_saver.region("weights", enable_cpu_backup=True):
        weights = allocate(5_000_000)
    with torch_memory_saver.region("kv"):
        kv = allocate(1_000_000)
    fill(weights, 5_000_000, 3)
    held = used() - before
    torch_memory_saver.pause()
    print("paused", held, used() - before)
    torch_memory_saver.resume()
    print("resumed", used() - before, same(weights, 5_000_000, 3))
