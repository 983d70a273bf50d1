"""torch_memory_saver.hooks.base: the hook mode type."""
from typing import Literal

HookMode = Literal["preload", "torch"]
