"""torch_memory_saver's API over memtool's regions.

Code written for torch_memory_saver runs by changing one import::

    from torch_memory_saver import torch_memory_saver          # before
    from memtool.torch_memory_saver import torch_memory_saver  # after

region(tag, enable_cpu_backup) maps to memtool.region(tag, backup="host" or
"none"); pause/resume(tag=None) to memtool's; hook_mode is "preload" or
"torch". Outside `memtool run` it is disabled (enabled is False) and does
nothing, as torch_memory_saver does without its preload library. What memtool
adds: CPU tensors in regions (backed up to disk), `memtool ctl PID pause TAG`
from outside, and every pause and resume in the trace.
"""
import contextlib

import memtool

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]


class TorchMemorySaver:
    def __init__(self):
        self._mode = None

    @contextlib.contextmanager
    def region(self, tag: str = "default", enable_cpu_backup: bool = False):
        """Allocations in the block are pausable under `tag`; with
        enable_cpu_backup their content is kept in host memory while paused."""
        if self._mode is not None:
            memtool.set_hook_mode(self._mode)
        with memtool.region(tag, backup="host" if enable_cpu_backup else "none", device="cuda"):
            yield

    @contextlib.contextmanager
    def disable(self):
        """Allocations in the block are not pausable, inside a region too."""
        with memtool.outside_regions():
            yield

    def pause(self, tag=None):
        memtool.pause(tag)

    def resume(self, tag=None):
        memtool.resume(tag)

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
