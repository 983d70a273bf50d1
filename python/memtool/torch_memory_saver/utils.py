"""torch_memory_saver.utils: the platform checks its examples import."""
import functools


@functools.lru_cache(maxsize=1)
def is_xpu() -> bool:
    """Whether torch runs on an Intel GPU (memtool serves CUDA only: then nothing is pausable)."""
    try:
        import torch
    except ImportError:
        return False
    return hasattr(torch, "xpu") and torch.xpu.is_available()
