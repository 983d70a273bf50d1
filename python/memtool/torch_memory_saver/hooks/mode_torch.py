"""torch_memory_saver.hooks.mode_torch: hook_mode="torch" is memtool.set_hook_mode("torch"),
whose pluggable allocator is memtool's collector."""
