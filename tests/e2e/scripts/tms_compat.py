# Code written for torch_memory_saver, with its import changed to memtool's, in a
# CPU-only process: its regions serve the device allocator only, a tag holds
# allocations of several backups, pause()/resume() raise where torch_memory_saver
# fails or ends the process, its submodules, argument checks and environment
# (TMS_DISK_BACKUP_DIR). argv[1]: a scratch directory.
import os
import sys

import memtool
import torch
from memtool.torch_memory_saver import torch_memory_saver
from memtool.torch_memory_saver.hooks.base import HookMode
from memtool.torch_memory_saver.hooks.mode_preload import configure_subprocess
from memtool.torch_memory_saver.testing_utils import get_device
from memtool.torch_memory_saver.utils import is_xpu

MiB = 1 << 20
scratch = sys.argv[1]


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


def attempt(what, *args):
    try:
        getattr(torch_memory_saver, what)(*args)
        print(what, *args, "ok")
    except RuntimeError as e:
        print(what, *args, "raised:", str(e).replace(scratch, "DIR"))


env_dir = os.environ["TMS_DISK_BACKUP_DIR"]
print("enabled", torch_memory_saver.enabled, "env dir made", os.path.isdir(env_dir))
print("submodules", get_device(), is_xpu(), HookMode.__args__)
with configure_subprocess():
    pass

# CPU tensors made in its regions stay the program's own, with any backup, the
# default tag entered with a host backup and then a disk one included.
with torch_memory_saver.region(tag="type1", enable_disk_backup=True):
    t1 = torch.full((8 * MiB,), 100, dtype=torch.uint8)
with torch_memory_saver.region(enable_cpu_backup=True):
    t2 = torch.full((4 * MiB,), 7, dtype=torch.uint8)
with torch_memory_saver.region(enable_disk_backup=True):
    t3 = torch.full((2 * MiB,), 3, dtype=torch.uint8)
    with torch_memory_saver.disable():
        plain = torch.full((MiB,), 1, dtype=torch.uint8)
torch_memory_saver.pause()
print("cpu tensors untouched", int(t1.sum()) == 100 * 8 * MiB, int(t2.sum()) == 7 * 4 * MiB,
      int(t3.sum()) == 3 * 2 * MiB, int(plain.sum()) == MiB)
torch_memory_saver.resume()
print("regions", memtool.regions())

# pause()/resume() on memtool's own CPU regions, disk-backed into TMS_DISK_BACKUP_DIR.
with memtool.region("kv", backup="disk"):
    kv = torch.full((MiB,), 5, dtype=torch.uint8)
attempt("pause", "kv")
print("kv backed up in the env dir", backed_up_in(env_dir))
attempt("pause", "kv")
attempt("resume", "kv")
attempt("resume", "kv")
attempt("pause", "no-such-tag")
print("kv kept", int(kv.sum()) == 5 * MiB)
# A pause that fails: the directory its backup goes to is gone.
gone = os.path.join(scratch, "gone")
torch_memory_saver.set_disk_backup_dir(gone)
with memtool.region("lost", backup="disk"):
    lost = torch.full((MiB,), 1, dtype=torch.uint8)
os.rmdir(gone)
attempt("pause", "lost")
print("lost untouched", int(lost.sum()) == MiB)

try:
    with torch_memory_saver.disable():
        pass
except AssertionError as e:
    print("disable outside a region:", e)
for kwargs in ({"cpu_backup_backend": "mmap"},
               {"enable_cpu_backup": True, "cpu_backup_backend": "paged"},
               {"enable_cpu_backup": True, "enable_disk_backup": True}):
    try:
        with torch_memory_saver.region(**kwargs):
            pass
    except ValueError as e:
        print("refused:", e)
try:
    memtool.set_backup_dir(os.path.join(scratch, "file"))  # what set_disk_backup_dir calls
except ValueError as e:
    print("refused:", e.args[0].replace(scratch, "DIR"))
# Pinned host memory kept after a resume: none here (no CUDA).
print("host pool", memtool.set_host_pool(0), memtool.set_host_pool(None), memtool.set_host_pool(1 << 70))
try:
    memtool.set_host_pool(-1)
except ValueError as e:
    print("refused:", e)
# A host budget (memtool run --host-budget's): taken, or refused with the reason.
memtool.set_host_budget(1 << 30)
memtool.set_host_budget(None)
try:
    memtool.set_host_budget("8GiB")
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
# region(graphs=True) (a block that captures CUDA graphs, their pools pausable): the
# torch hook mode has no way, and says so before anything is entered.
memtool.set_hook_mode("torch")
try:
    with memtool.region("graphs", graphs=True):
        pass
except RuntimeError as e:
    print("refused:", e)
memtool.set_hook_mode("preload")
