"""torch_memory_saver's API over memtool's regions.

Code written for torch_memory_saver runs by changing one import::

    from torch_memory_saver import torch_memory_saver          # before
    from memtool.torch_memory_saver import torch_memory_saver  # after

and its submodules likewise (`memtool.torch_memory_saver.testing_utils`, `.utils`,
`.hooks.base`, `.hooks.mode_preload`, `.hooks.mode_torch`).

region(tag, enable_cpu_backup, enable_disk_backup, cpu_backup_backend) serves the
device allocator only, as torch_memory_saver does: a CPU tensor made inside stays
the program's own. Each allocation keeps the backup of the block it was made in,
so one tag may hold host- and disk-backed memory (its cpu_backup.py and
disk_backup.py examples). cpu_backup_backend ("pinned" or "mmap") is checked as
torch_memory_saver checks it, and either gives memtool's host backup.
pause()/resume() do what torch_memory_saver does where it does something (a tag
with no allocation: nothing) and raise RuntimeError where it fails or ends the
process (a second pause, a resume of what is not paused). Its environment:
TMS_INIT_ENABLE, TMS_INIT_ENABLE_CPU_BACKUP, TMS_INIT_ENABLE_DISK_BACKUP,
TMS_INIT_CPU_BACKUP_BACKEND and TMS_DISK_BACKUP_CHUNK_MB are read by the collector
at start-up (collectors/control/TmsEnvironment.h), TMS_DISK_BACKUP_DIR and
TMS_RETAIN_CPU_BACKUP here. The differences that remain are in
docs/pausable-memory.md's table. Outside `memtool run` it is disabled (enabled is
False) and does nothing.
"""
import contextlib
import os
import sys
import threading

import memtool

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

_TAG_DEFAULT = "default"


def _env_flag(name):
    # torch_memory_saver's get_bool_env_var: unset is False.
    value = os.environ.get(name)
    if value is None:
        return False
    if value in ("1", "true", "TRUE", "yes", "YES"):
        return True
    if value in ("0", "false", "FALSE", "no", "NO"):
        return False
    raise ValueError(f"{name}={value} is not a value torch_memory_saver takes (1, true, yes or 0, false, no)")


def _validate_backend(enable_cpu_backup, cpu_backup_backend):
    if cpu_backup_backend is None:
        return
    if not enable_cpu_backup:
        raise ValueError("cpu_backup_backend requires enable_cpu_backup=True")
    if cpu_backup_backend not in ("pinned", "mmap"):
        raise ValueError(f"cpu_backup_backend is 'pinned' or 'mmap', not {cpu_backup_backend!r}")


def _device():
    # The NPU edition's device='npu' where torch_npu is imported, else CUDA.
    return "npu" if "torch_npu" in sys.modules else "cuda"


class TorchMemorySaver:
    def __init__(self):
        self._mode = None
        self._retain = _env_flag("TMS_RETAIN_CPU_BACKUP")
        self._inside = threading.local()  # region() depth of this thread
        directory = os.environ.get("TMS_DISK_BACKUP_DIR")
        if directory and memtool.enabled:
            self.set_disk_backup_dir(directory)

    @contextlib.contextmanager
    def region(self, tag: str = _TAG_DEFAULT, enable_cpu_backup: bool = False,
               enable_disk_backup: bool = False, cpu_backup_backend=None):
        """CUDA (or, with torch_npu, NPU) allocations in the block are pausable under `tag`; with
        enable_cpu_backup their content is kept in host memory while paused,
        with enable_disk_backup in a file of the backup directory."""
        _validate_backend(enable_cpu_backup, cpu_backup_backend)
        if enable_cpu_backup and enable_disk_backup:
            raise ValueError("enable_cpu_backup and enable_disk_backup are mutually exclusive")
        backup = "host" if enable_cpu_backup else "disk" if enable_disk_backup else "none"
        if self._mode is not None:
            memtool.set_hook_mode(self._mode)
        with self._entered(), memtool._region(tag, backup, _device(), cpu=False):
            yield

    @contextlib.contextmanager
    def cuda_graph(self, cuda_graph, pool=None, stream=None, capture_error_mode="global",
                   tag: str = _TAG_DEFAULT, enable_cpu_backup: bool = False, cpu_backup_backend=None):
        """torch.cuda.graph(...), with the memory its capture allocates pausable
        under `tag` (the graph's own pool serves it, as in torch_memory_saver)."""
        _validate_backend(enable_cpu_backup, cpu_backup_backend)
        if self._mode == "torch":
            raise RuntimeError("cuda_graph needs hook_mode='preload' (as in torch_memory_saver)")
        import torch

        backup = "host" if enable_cpu_backup else "none"
        with torch.cuda.graph(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode):
            with self._entered(), memtool._region(tag, backup, None, cpu=False, pool=False):
                yield

    @contextlib.contextmanager
    def disable(self):
        """Allocations in the block are not pausable, inside a region too."""
        if getattr(self._inside, "depth", 0) == 0 and not _env_flag("TMS_INIT_ENABLE"):
            # torch_memory_saver asserts the same: disable() undoes a region.
            raise AssertionError("disable() should be called only when tms is active "
                                 "(inside a region(), or with TMS_INIT_ENABLE=1)")
        with memtool.outside_regions():
            yield

    @contextlib.contextmanager
    def _entered(self):
        self._inside.depth = getattr(self._inside, "depth", 0) + 1
        try:
            yield
        finally:
            self._inside.depth -= 1

    def set_disk_backup_dir(self, path: str):
        """Disk backups go to `path` from now on (made if it does not exist)."""
        os.makedirs(path, exist_ok=True)
        memtool.set_backup_dir(path)

    def pause(self, tag=None):
        """Pauses the memory of `tag` (None: every tag)."""
        self._checked("pause", tag, memtool.pause(tag))

    def resume(self, tag=None):
        """Resumes the memory of `tag` (None: every tag) at its addresses."""
        if memtool.enabled:
            memtool.set_host_pool(None if self._retain else 0)
        self._checked("resume", tag, memtool.resume(tag))

    def _checked(self, what, tag, result):
        if not memtool.enabled or (result.ok and result.changed):
            return
        mine = [r for r in memtool.regions() if tag is None or r.tag == tag]
        if not result.ok:
            if tag is not None and not mine:
                return  # a tag no allocation had: torch_memory_saver does nothing
            raise RuntimeError(f"torch_memory_saver.{what}({tag!r}) failed: {result.message}")
        # Where torch_memory_saver prints "Cannot pause allocation that is not
        # active" (or "... resume ... not paused") and ends the process.
        if what == "pause" and any(r.paused_bytes for r in mine):
            raise RuntimeError(f"torch_memory_saver.pause({tag!r}): its memory is paused already "
                               "(torch_memory_saver ends the process on a second pause)")
        if what == "resume" and any(r.resident_bytes for r in mine):
            raise RuntimeError(f"torch_memory_saver.resume({tag!r}): its memory is not paused "
                               "(torch_memory_saver ends the process on a resume without a pause)")

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

from memtool.torch_memory_saver.hooks.mode_preload import configure_subprocess  # noqa: E402
