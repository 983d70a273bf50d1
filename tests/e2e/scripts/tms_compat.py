# torch_memory_saver's own examples (its README: tags, backups, disable) run
# with one import changed, on CPU tensors. argv[1]: a directory for
# set_disk_backup_dir, made by it.
import os
import sys

import memtool
import torch
from memtool.torch_memory_saver import torch_memory_saver

MiB = 1 << 20


def backed_up_in(directory):
    # A disk backup is a file no name points to: this process's descriptors show it.
    prefix = os.path.realpath(directory) + "/"
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            held += os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
        except OSError:
            pass
    return held


backups = os.path.join(sys.argv[1], "tms-backups")
torch_memory_saver.set_disk_backup_dir(backups)
print("enabled", torch_memory_saver.enabled, "dir made", os.path.isdir(backups))

with torch_memory_saver.region(tag="type1", enable_disk_backup=True):
    tensor1 = torch.full((8 * MiB,), 100, dtype=torch.uint8)
with torch_memory_saver.region(tag="type2"):
    tensor2 = torch.full((4 * MiB,), 7, dtype=torch.uint8)
    with torch_memory_saver.disable():
        plain = torch.full((2 * MiB,), 3, dtype=torch.uint8)
address = tensor1.data_ptr()

torch_memory_saver.pause("type1")
print("type1 backed up in its directory", backed_up_in(backups))
torch_memory_saver.pause("type2")
print("plain untouched", int(plain.sum()) == 3 * 2 * MiB)
torch_memory_saver.resume("type2")
torch_memory_saver.resume("type1")
print("type1 kept", int(tensor1.sum()) == 100 * 8 * MiB, "at its address", tensor1.data_ptr() == address)
torch_memory_saver.pause()
torch_memory_saver.resume()
print("all again", int(tensor1.sum()) == 100 * 8 * MiB)

for kwargs in ({"cpu_backup_backend": "mmap"},
               {"enable_cpu_backup": True, "cpu_backup_backend": "paged"},
               {"enable_cpu_backup": True, "enable_disk_backup": True}):
    try:
        with torch_memory_saver.region(**kwargs):
            pass
    except ValueError as e:
        print("refused:", e)
try:
    memtool.set_backup_dir(os.path.join(sys.argv[1], "file"))  # what set_disk_backup_dir calls
except ValueError as e:
    print("refused:", e.args[0].replace(sys.argv[1], "DIR"))
# Pinned host memory kept after a resume: none here (CPU regions back up to disk).
print("host pool", memtool.set_host_pool(0), memtool.set_host_pool(None), memtool.set_host_pool(1 << 70))
try:
    memtool.set_host_pool(-1)
except ValueError as e:
    print("refused:", e)
# torch_memory_saver's retention flag (consulted at resume) and its margin (set only).
print("retain", torch_memory_saver.retain_cpu_backup, end=" ")
torch_memory_saver.retain_cpu_backup = True
print(torch_memory_saver.retain_cpu_backup)
torch_memory_saver.memory_margin_bytes = 0
try:
    torch_memory_saver.memory_margin_bytes
except NotImplementedError as e:
    print("margin:", e)
