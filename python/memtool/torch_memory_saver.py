"""torch_memory_saver's API over memtool's regions.

Code written for torch_memory_saver runs by changing one import::

    from torch_memory_saver import torch_memory_saver          # before
    from memtool.torch_memory_saver import torch_memory_saver  # after

region(tag, enable_cpu_backup, enable_disk_backup, cpu_backup_backend) maps to
memtool.region(tag, backup="host", "disk" or "none"); cpu_backup_backend
("pinned" or "mmap") is checked as torch_memory_saver checks it, and either
gives memtool's host backup (pinned memory from a pool it reuses);
set_disk_backup_dir(path) to memtool.set_backup_dir; pause/resume(tag=None) to
memtool's; hook_mode is "preload" or "torch"; memory_margin_bytes (set only) to
memtool.set_memory_margin; retain_cpu_backup (False unless
TMS_RETAIN_CPU_BACKUP=1, as torch_memory_saver's), consulted at each resume:
False gives host backups' pinned memory back after it (memtool.set_host_pool(0)),
True keeps it for the next pause (set_host_pool(None)). Outside `memtool run` it is
disabled (enabled is False) and does nothing, as torch_memory_saver does
without its preload library. What memtool adds: CPU tensors in regions (backed
up to disk), `memtool ctl PID pause TAG` from outside, and every pause and
resume in the trace. get_cpu_backup(x) is memtool.read_backup(x): a copy
(zero_copy is not offered), of disk backups too, None when x has no backup to
read. Not offered (torch_memory_saver's CUDA-only extra): cuda_graph.
"""
import contextlib
import os

import memtool

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]


class TorchMemorySaver:
    def __init__(self):
        self._mode = None
        self._retain = os.environ.get("TMS_RETAIN_CPU_BACKUP", "") == "1"

    @contextlib.contextmanager
    def region(self, tag: str = "default", enable_cpu_backup: bool = False,
               enable_disk_backup: bool = False, cpu_backup_backend=None):
        """Allocations in the block are pausable under `tag`; with
        enable_cpu_backup their content is kept in host memory while paused,
        with enable_disk_backup in a file of the backup directory."""
        if cpu_backup_backend is not None:
            if not enable_cpu_backup:
                raise ValueError("cpu_backup_backend requires enable_cpu_backup=True")
            if cpu_backup_backend not in ("pinned", "mmap"):
                raise ValueError(f"cpu_backup_backend is 'pinned' or 'mmap', not {cpu_backup_backend!r}")
        if enable_cpu_backup and enable_disk_backup:
            raise ValueError("enable_cpu_backup and enable_disk_backup are mutually exclusive")
        backup = "host" if enable_cpu_backup else "disk" if enable_disk_backup else "none"
        if self._mode is not None:
            memtool.set_hook_mode(self._mode)
        with memtool.region(tag, backup=backup, device="cuda"):
            yield

    @contextlib.contextmanager
    def disable(self):
        """Allocations in the block are not pausable, inside a region too."""
        with memtool.outside_regions():
            yield

    def set_disk_backup_dir(self, path: str):
        """Disk backups go to `path` from now on (made if it does not exist)."""
        os.makedirs(path, exist_ok=True)
        memtool.set_backup_dir(path)

    def pause(self, tag=None):
        memtool.pause(tag)

    def resume(self, tag=None):
        if memtool.enabled:
            memtool.set_host_pool(None if self._retain else 0)
        memtool.resume(tag)

    def get_cpu_backup(self, x, zero_copy=False):
        """A CPU copy of paused tensor x from its backup; None when there is none."""
        try:
            return memtool.read_backup(x)
        except ValueError:
            return None

    @property
    def retain_cpu_backup(self):
        return self._retain

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value):
        self._retain = bool(value)

    @property
    def memory_margin_bytes(self):
        raise NotImplementedError("Only setter is supported")

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value):
        memtool.set_memory_margin(value)

    @property
    def enabled(self):
        return memtool.enabled

    @property
    def hook_mode(self):
        raise AttributeError("hook_mode can only be set")

    @hook_mode.setter
    def hook_mode(self, mode):
        memtool.set_hook_mode(mode)
        self._mode = mode


torch_memory_saver = TorchMemorySaver()


@contextlib.contextmanager
def configure_subprocess():
    """torch_memory_saver sets LD_PRELOAD for child processes here; under
    `memtool run` every child inherits the collector already."""
    yield
