"""memtool from inside the program: pausable memory regions.

Under `memtool run`, allocations made inside ``with memtool.region(tag):`` come
from memory that ``memtool.pause(tag)`` releases while the tensors keep their
addresses, and ``memtool.resume(tag)`` gives back (with the content when the
region has a backup). ``memtool ctl PID pause TAG`` does the same from outside.

Outside `memtool run` the module imports and does nothing: ``memtool.enabled``
is False, regions are plain blocks, and pause/resume warn once and return an
empty result.
"""
import contextlib
import threading
import warnings
from dataclasses import dataclass

from . import _collector

__all__ = ["enabled", "region", "pause", "resume", "regions", "Result", "Region"]

_BACKUPS = {"none": 0, "host": 1, "disk": 2}
_collector_handle = _collector.find()
enabled = _collector_handle is not None
_warned = False
_warn_lock = threading.Lock()


@dataclass(frozen=True)
class Result:
    """What a pause or resume did."""

    ok: bool            # False: it failed; `message` says why and what was left as it was
    changed: bool       # some memory was paused or resumed
    bytes: int          # physical bytes released or restored
    regions: int        # regions (a tag on a device) touched
    allocations: int
    seconds: float
    message: str

    def __bool__(self):
        return self.ok


@dataclass(frozen=True)
class Region:
    tag: str
    device: str         # "cpu", "cuda:0", ...
    bytes: int          # live bytes, resident or paused
    resident_bytes: int
    paused_bytes: int
    state: str          # "resident", "paused", "partly paused"
    backup: str         # "none", "host", "disk"


def _disabled(what):
    global _warned
    with _warn_lock:
        if not _warned:
            _warned = True
            warnings.warn(f"memtool.{what}: this process does not run under `memtool run`; "
                          "regions, pause and resume do nothing", RuntimeWarning, stacklevel=3)
    return Result(ok=True, changed=False, bytes=0, regions=0, allocations=0, seconds=0.0,
                  message="memtool is not enabled in this process")


@contextlib.contextmanager
def region(tag="default", backup="none"):
    """Allocations this thread makes inside the block belong to region `tag`.

    backup: "none" (content undefined after a resume), "host" (CUDA memory, kept in
    pinned host memory while paused) or "disk". Nested regions: the innermost wins.
    """
    if backup not in _BACKUPS:
        raise ValueError(f"backup must be one of {', '.join(_BACKUPS)}, not {backup!r}")
    if not isinstance(tag, str) or not tag:
        raise ValueError("a region tag is a non-empty string")
    if not enabled:
        yield
        return
    _collector_handle.region_enter(tag, _BACKUPS[backup])
    try:
        yield
    finally:
        _collector_handle.region_exit()


def _result(answer):
    return Result(ok=answer["ok"], changed=answer["changed"], bytes=answer["bytes"], regions=answer["regions"],
                  allocations=answer["allocations"], seconds=answer["seconds"], message=answer["message"])


def pause(tag=None):
    """Releases the physical memory of every allocation of `tag` (None: every tag)."""
    if not enabled:
        return _disabled("pause")
    return _result(_collector_handle.pause(tag))


def resume(tag=None):
    """Gives back the memory of `tag` (None: every tag) at the same addresses."""
    if not enabled:
        return _disabled("resume")
    return _result(_collector_handle.resume(tag))


def regions():
    """Every region: tag, device, bytes, state, backup."""
    if not enabled:
        return []
    return [Region(**r) for r in _collector_handle.regions()]
