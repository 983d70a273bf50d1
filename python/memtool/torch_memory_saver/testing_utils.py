"""torch_memory_saver.testing_utils: the helpers its examples and tests import."""
import torch

from memtool.torch_memory_saver.utils import is_xpu


def get_device() -> str:
    """The device the examples allocate on: 'cuda' ('xpu' on Intel GPUs), as there."""
    return "xpu" if is_xpu() else "cuda"


def empty_cache():
    (torch.xpu if is_xpu() else torch.cuda).empty_cache()


def get_and_print_gpu_memory(message, gpu_id=0):
    """The device's used memory in bytes, printed in GB with `message`."""
    if is_xpu() or torch.version.hip:
        free, total = (torch.xpu if is_xpu() else torch.cuda).mem_get_info(gpu_id)
        used = total - free
    else:
        used = torch.cuda.device_memory_used(gpu_id)
    print(f"GPU {gpu_id} memory: {used / 1024 ** 3:.2f} GB ({message})")
    return used
