"""torch_memory_saver.hooks.mode_preload: configure_subprocess."""
import contextlib


@contextlib.contextmanager
def configure_subprocess():
    """torch_memory_saver sets LD_PRELOAD for child processes here; under
    `memtool run` every child inherits the collector already."""
    yield
