"""torch_memory_saver.testing_utils: the helpers its examples and tests import."""
import sys

import torch

from memtool.torch_memory_saver.utils import is_xpu


def get_device() -> str:
    """The device the examples allocate on: 'cuda' ('xpu' on Intel GPUs, 'npu' with
    torch_npu, as in the NPU edition)."""
    if "torch_npu" in sys.modules:
        return "npu"
    return "xpu" if is_xpu() else "cuda"


def _module():
    return torch.npu if "torch_npu" in sys.modules else torch.xpu if is_xpu() else torch.cuda


def empty_cache():
    _module().empty_cache()


def get_and_print_gpu_memory(message, gpu_id=0):
    """The device's used memory in bytes, printed in GB with `message`."""
    if is_xpu() or torch.version.hip or "torch_npu" in sys.modules:
        free, total = _module().mem_get_info(gpu_id)
        used = total - free
    else:
        used = torch.cuda.device_memory_used(gpu_id)
    print(f"GPU {gpu_id} memory: {used / 1024 ** 3:.2f} GB ({message})")
    return used
