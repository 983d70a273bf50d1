"""torch_memory_saver.hooks: its hook modes, "preload" and "torch" (memtool.set_hook_mode)."""
