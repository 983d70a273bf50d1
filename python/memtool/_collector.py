"""The collector's C surface, found in this process (collectors/CollectorApi.h).

`memtool run` preloads libmemtool_collector.so; its exported functions are in
the process's global symbol scope, so ctypes finds them through the main
program's handle without ever loading a second copy of the library.
"""
import ctypes
import json
import os

API_VERSION = 3
_ANSWER_BYTES = 1 << 20


class Collector:
    """Thin typed wrappers over the C functions; None where memtool is absent."""

    def __init__(self, lib):
        self._lib = lib
        self._answer = None
        f = lib.memtool_region_enter
        f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        lib.memtool_region_exit.argtypes = []
        lib.memtool_region_exit.restype = None
        for name in ("memtool_pause", "memtool_resume"):
            g = getattr(lib, name)
            g.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
            g.restype = ctypes.c_int
        lib.memtool_regions.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.memtool_regions.restype = ctypes.c_size_t
        lib.memtool_collector_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.memtool_collector_path.restype = ctypes.c_size_t

    def region_enter(self, tag, backup):
        """Enters `tag`; None enters "no region" (allocations are the program's own)."""
        err = ctypes.create_string_buffer(512)
        encoded = tag.encode("utf-8") if tag is not None else None
        if self._lib.memtool_region_enter(encoded, backup, err, len(err)) != 0:
            raise ValueError(err.value.decode("utf-8", "replace"))

    def region_exit(self):
        self._lib.memtool_region_exit()

    def _op(self, fn, tag):
        # One answer buffer, made once: a pause must not grow the process it shrinks.
        if self._answer is None:
            self._answer = ctypes.create_string_buffer(64 * 1024)
        fn(tag.encode("utf-8") if tag is not None else None, self._answer, len(self._answer))
        return json.loads(self._answer.value.decode("utf-8", "replace"))

    def courtesy(self, name, to_host):
        """memtool_yield(to_host, ...) or memtool_restore(...), with its JSON answer."""
        fn = getattr(self._lib, name)
        if self._answer is None:
            self._answer = ctypes.create_string_buffer(64 * 1024)
        if to_host is None:
            fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            fn(self._answer, len(self._answer))
        else:
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
            fn(to_host, self._answer, len(self._answer))
        return json.loads(self._answer.value.decode("utf-8", "replace"))

    def pause(self, tag):
        return self._op(self._lib.memtool_pause, tag)

    def resume(self, tag):
        return self._op(self._lib.memtool_resume, tag)

    def regions(self):
        size = 64 * 1024
        while size <= _ANSWER_BYTES * 64:
            out = ctypes.create_string_buffer(size)
            n = self._lib.memtool_regions(out, size)
            if n:
                return json.loads(out.value[:n].decode("utf-8", "replace"))
            size *= 4
        raise RuntimeError("memtool: the list of regions does not fit in memory")

    def set_backup_dir(self, directory):
        """Where disk backups go from now on; ValueError with the reason when it cannot be."""
        f = self._lib.memtool_set_backup_dir
        f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        err = ctypes.create_string_buffer(512)
        if f(os.fsencode(directory), err, len(err)) != 0:
            raise ValueError(err.value.decode("utf-8", "replace"))

    def set_host_pool(self, max_bytes):
        """The most pinned host memory kept after a resume; returns what is kept."""
        f = self._lib.memtool_set_host_pool
        f.argtypes = [ctypes.c_uint64]
        f.restype = ctypes.c_uint64
        return f(max_bytes)

    def set_host_budget(self, nbytes):
        """The most pinned host memory host backups and the pool may hold."""
        f = self._lib.memtool_set_host_budget
        f.argtypes = [ctypes.c_uint64]
        f.restype = None
        f(nbytes)

    def set_memory_margin(self, nbytes):
        """Device memory a new CUDA region allocation must leave free."""
        f = self._lib.memtool_set_memory_margin
        f.argtypes = [ctypes.c_uint64]
        f.restype = None
        f(nbytes)

    def read_backup(self, address, dst, nbytes):
        """Copies nbytes of paused memory from its backup; ValueError with the reason."""
        f = self._lib.memtool_read_backup
        f.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        err = ctypes.create_string_buffer(512)
        if f(address, dst, nbytes, err, len(err)) != 0:
            raise ValueError(err.value.decode("utf-8", "replace"))

    def flush(self):
        """Sends the collector's buffered records to memtool run now."""
        self._lib.memtool_flush.argtypes = []
        self._lib.memtool_flush.restype = None
        self._lib.memtool_flush()

    def path(self):
        out = ctypes.create_string_buffer(4096)
        n = self._lib.memtool_collector_path(out, len(out))
        return out.value[:n].decode() if n else None


def find():
    """The collector of this process, or None outside `memtool run`."""
    try:
        lib = ctypes.CDLL(None)
        version = lib.memtool_collector_api_version
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_int
    if version() != API_VERSION:
        return None
    enabled = lib.memtool_enabled
    enabled.restype = ctypes.c_int
    if not enabled():
        return None
    return Collector(lib)
