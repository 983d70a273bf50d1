"""memtool.allocated(), freed(), current(), peak() and top_sites(): MemLord's
questions, answered from memtool run's exact figures of this process so far
(cli/live/LiveReports.h: countersReport). No trace is written; one question is
one round trip to memtool run, which folds what the process sent first."""
from typing import NamedTuple

from . import _run


class Bytes(NamedTuple):
    """A figure in bytes and as a reader's text, as MemLord gives them."""
    bytes: int
    text: str


class Site(NamedTuple):
    device: str
    site: str            # "step (train.py:7)": the site as memtool's tables name it
    allocated_bytes: int
    freed_bytes: int     # of what it allocated, what was freed since
    live_bytes: int      # of what it allocated, what is live now (paused included)


_BY = {"allocated": "allocated_bytes", "freed": "freed_bytes", "live": "live_bytes"}


def _text(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _matches(device):
    """A predicate on device names for `device`: None (every device), a
    torch.device, "cuda" (every CUDA device), "cuda:1", "cpu"."""
    if device is None:
        return lambda name: True
    text = str(device)
    if text == "cuda":
        return lambda name: name.startswith("cuda:")
    if text.startswith("cuda:") or text in ("cpu", "pinned", "shared"):
        return lambda name: name == text
    raise ValueError(f"device is None, 'cpu', 'cuda', 'cuda:N' (or a torch.device), not {device!r}")


def _report(collector, what, sites):
    if collector is None:
        raise RuntimeError(f"memtool.{what} needs `memtool run` (or memtool.track)")
    return _run.ask(collector, {"op": "counters", "sites": sites})["body"]


def device_figure(collector, what, key, device):
    match = _matches(device)
    report = _report(collector, what, sites=False)
    total = sum(d[key] for name, d in report["devices"].items() if match(name))
    return Bytes(total, _text(total))


def top_sites(collector, device, n, by):
    if by not in _BY:
        raise ValueError(f"by is 'allocated', 'freed' or 'live', not {by!r}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n is a number of sites of 1 or more, not {n!r}")
    match = _matches(device)
    rows = [Site(s["device"], s["site"], s["allocated_bytes"], s["freed_bytes"], s["live_bytes"])
            for s in _report(collector, "top_sites", sites=True)["sites"] if match(s["device"])]
    key = _BY[by]
    rows.sort(key=lambda s: (-getattr(s, key), s.device, s.site))
    return [s for s in rows if getattr(s, key) > 0][:n]
