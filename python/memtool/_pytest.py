"""memtool's pytest plugin (registered by the wheel; off unless asked).

    pytest --memtool                      each test under memtool.track, and a table
    @pytest.mark.limit_memory("24 MB", device="cpu")   fails a test whose peak reaches it
    @pytest.mark.limit_leaks("1 MB")      fails a test with a site that leaked that much
    --memtool-limit SIZE                  limit_memory for every test without its own
    --memtool-trace-dir DIR               a trace per test, kept (DIR/<test id>.json)
    --memtool-save FILE                   every test's figures, for a later --memtool-baseline
    --memtool-baseline FILE               fail a test whose peak grew past
    --memtool-max-increase P%             ... this much over the baseline's (default 0%)

The markers have pytest-memray's names and meanings, so a suite written for it
runs unchanged: sizes as "<NUMBER> B|KB|MB|GB|TB|PB" (1 KB = 1,024 B, as pytest-memray
reads them), limit_memory fails when the test's peak reaches the limit, limit_leaks
when one site (a hotspot: memtool's allocation site) leaked at least its limit.
What memtool measures is torch's memory (CPU storages, shared memory, CUDA), not
every Python object. A test that forks (a DataLoader's workers) counts its
workers too: its peak on a device is the sum of each process's peak there.
"""
import json
import os
import re
import shutil
import tempfile

import pytest

_UNIT = re.compile(r"^\s*(?P<quantity>\+?\d*\.\d+|\+?\d+)\s*(?P<unit>[KMGTP]?B)\s*$", re.IGNORECASE)
_MULTIPLIER = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "PB": 1024**5}
_RESULTS_SCHEMA = "memtool.pytest/1"
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


def parse_size(text):
    """Bytes of pytest-memray's "24 MB" (1 KB = 1,024 B); ValueError when it is none."""
    m = _UNIT.match(str(text)) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a size (<NUMBER> B|KB|MB|GB|TB|PB, e.g. \"24 MB\")")
    return int(float(m.group("quantity")) * _MULTIPLIER[m.group("unit").upper()])


def parse_percent(text):
    m = re.match(r"^\s*(\d+(\.\d+)?)\s*%?\s*$", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a percentage (e.g. 10%)")
    return float(m.group(1))


def pytest_addoption(parser):
    group = parser.getgroup("memtool", "memtool: torch and CUDA memory per test")
    group.addoption("--memtool", action="store_true", default=False,
                    help="Track each test with memtool and print a table of their memory")
    group.addoption("--memtool-limit", metavar="SIZE", default=None,
                    help="A limit_memory for every test that has none of its own")
    group.addoption("--memtool-trace-dir", metavar="DIR", default=None,
                    help="Keep a trace per test there (memtool report reads them)")
    group.addoption("--memtool-save", metavar="FILE", default=None,
                    help="Write every test's figures there (a later run's --memtool-baseline)")
    group.addoption("--memtool-baseline", metavar="FILE", default=None,
                    help="Fail a test whose peak grew past --memtool-max-increase over this file's")
    group.addoption("--memtool-max-increase", metavar="P%", default="0%",
                    help="How much a test's peak may grow over the baseline's (default 0%%)")
    group.addoption("--memtool-top", metavar="N", type=int, default=10,
                    help="How many tests the table lists (0: all)")


def pytest_configure(config):
    config.addinivalue_line("markers", "limit_memory(memory_limit, device='cpu'): fail the test when its "
                            "peak memory on the device reaches memory_limit (memtool, pytest-memray)")
    config.addinivalue_line("markers", "limit_leaks(location_limit, filter_fn=None): fail the test when a "
                            "site leaked location_limit or more (memtool, pytest-memray)")
    if config.getoption("memtool"):
        config.pluginmanager.register(MemtoolPlugin(config), "memtool-tracker")


def _device_of(marker):
    device = marker.kwargs.get("device", "cpu")
    return "cuda:0" if device == "cuda" else device


class _Figures:
    """One test's figures, from its trace: per device the sum over its processes."""

    def __init__(self, trace_path):
        with open(trace_path) as f:
            trace = json.load(f)
        self.processes = trace["processes"]
        self.devices = {}
        for p in self.processes:
            for name, d in p.get("devices", {}).items():
                total = self.devices.setdefault(name, {"peak": 0, "allocated": 0, "leaked": 0, "count": 0})
                total["peak"] += d["peak_bytes"]
                total["allocated"] += d["allocated_bytes"]
                total["leaked"] += d.get("leaked_bytes", d["current_bytes"])
                total["count"] += d["alloc_count"]

    def peak(self, device):
        return self.devices.get(device, {}).get("peak", 0)

    def top_sites(self, device, n=3):
        """The sites that held the most at the device's peak: (bytes, site, pid)."""
        rows = [(h["peak_bytes"], h["site"], p["pid"]) for p in self.processes for h in p.get("hotspots", [])
                if h["device"] == device and h["peak_bytes"] > 0]
        return sorted(rows, key=lambda r: -r[0])[:n]

    def leaking_sites(self, limit, filter_fn):
        rows = []
        for p in self.processes:
            frames = p.get("frames", [])
            for h in p.get("hotspots", []):
                if h.get("leaked_bytes", 0) < limit:
                    continue
                if filter_fn is not None and not filter_fn(_stack_of(h, frames)):
                    continue
                rows.append((h["leaked_bytes"], h["site"], h["device"], p["pid"]))
        return sorted(rows, key=lambda r: -r[0])


def _stack_of(hotspot, frames):
    """pytest-memray's Stack (frames most recent first: function, filename, lineno)
    of a hotspot, for limit_leaks' filter_fn."""
    from types import SimpleNamespace
    out = []
    for i in hotspot.get("frames", []):
        f = frames[i] if isinstance(i, int) and i < len(frames) else {}
        out.append(SimpleNamespace(function=f.get("function", "???"), filename=f.get("file", "???"),
                                   lineno=f.get("line", 0)))
    return SimpleNamespace(frames=tuple(out))


def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


class MemtoolPlugin:
    def __init__(self, config):
        self.config = config
        self.results = {}  # nodeid -> _Figures
        self.failures = {}  # nodeid -> message
        limit = config.getoption("memtool_limit")
        self.default_limit = self._option("--memtool-limit", limit, parse_size) if limit is not None else None
        self.max_increase = self._option("--memtool-max-increase", config.getoption("memtool_max_increase"),
                                         parse_percent)
        self.baseline = self._read_baseline(config.getoption("memtool_baseline"))
        kept = config.getoption("memtool_trace_dir")
        self.trace_dir = os.path.abspath(kept) if kept else tempfile.mkdtemp(prefix="memtool-pytest-")
        self.keep_traces = bool(kept)
        self.companion = None
        os.makedirs(self.trace_dir, exist_ok=True)

    @staticmethod
    def _option(name, value, parse):
        try:
            return parse(value)
        except ValueError as e:
            raise pytest.UsageError(f"{name}: {e}") from None

    @staticmethod
    def _read_baseline(path):
        if path is None:
            return None
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise pytest.UsageError(f"--memtool-baseline {path}: cannot be read as JSON ({e})") from None
        if not isinstance(data, dict) or data.get("schema") != _RESULTS_SCHEMA:
            raise pytest.UsageError(f"--memtool-baseline {path}: not a file of memtool's pytest results "
                                    f"(schema {_RESULTS_SCHEMA}; --memtool-save writes one)")
        return data.get("tests", {})

    # ---- collection: the markers' values, checked before anything runs -----------------
    def pytest_collection_modifyitems(self, items):
        for item in items:
            for marker in item.iter_markers("limit_memory"):
                self._check_marker(item, marker, "limit_memory", "memory_limit", device=True)
            for marker in item.iter_markers("limit_leaks"):
                self._check_marker(item, marker, "limit_leaks", "location_limit", device=False)

    def _check_marker(self, item, marker, name, argument, device):
        value = marker.args[0] if marker.args else marker.kwargs.get(argument)
        try:
            parse_size(value)
        except ValueError as e:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name}: {e}") from None
        if not device:
            return
        dev = _device_of(marker)
        if not isinstance(dev, str) or not _DEVICE.match(dev):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.limit_memory: device {dev!r} is not cpu or "
                                    "cuda:N")
        if dev.startswith("cuda"):
            import torch
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if int(dev.split(":")[1]) >= count:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.limit_memory: device {dev} does not "
                                        f"exist here ({count} CUDA device{'s' if count != 1 else ''})")

    # ---- each test -----------------------------------------------------------------------
    def _trace_path(self, nodeid):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_")[:200]
        return os.path.join(self.trace_dir, name + ".json")

    def _companion(self):
        """One memtool for the whole session, serving each test's block in turn
        (starting one per test would cost each test a process start)."""
        if self.companion is None:
            from . import _track
            self.companion = _track.Companion(_track._options(native=False), serve=True)
        return self.companion

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        import memtool
        tracker = memtool.track(self._trace_path(pyfuncitem.nodeid), companion=self._companion())
        tracker.start()
        try:
            yield
        finally:
            tracker.stop()
        figures = _Figures(tracker.trace)
        self.results[pyfuncitem.nodeid] = figures
        for device, d in figures.devices.items():
            for key in ("peak", "allocated", "leaked", "count"):
                pyfuncitem.user_properties.append((f"memtool.{key}.{device}", d[key]))
        message = self._verdict(pyfuncitem, figures)
        if message:
            self.failures[pyfuncitem.nodeid] = message

    def _verdict(self, item, figures):
        """Why the test fails on memory; None when it does not."""
        problems = []
        limits = [(parse_size(m.args[0] if m.args else m.kwargs["memory_limit"]), _device_of(m))
                  for m in item.iter_markers("limit_memory")]
        if not limits and self.default_limit is not None:
            limits = [(self.default_limit, d) for d in (figures.devices or {"cpu": None})]
        for limit, device in limits:
            peak = figures.peak(device)
            if peak >= limit:
                sites = "".join(f"\n    {_bytes(b)} at {site}" + (f" (pid {pid})" if len(figures.processes) > 1
                                                                   else "")
                                for b, site, pid in figures.top_sites(device))
                problems.append(f"Test peaked at {_bytes(peak)} ({peak:,} B) on {device}, reaching its limit of "
                                f"{_bytes(limit)} ({limit:,} B); the sites that held the most then:{sites}")
        for m in item.iter_markers("limit_leaks"):
            limit = parse_size(m.args[0] if m.args else m.kwargs["location_limit"])
            leaks = figures.leaking_sites(limit, m.kwargs.get("filter_fn"))
            if leaks:
                rows = "".join(f"\n    {_bytes(b)} on {device} at {site}" for b, site, device, _ in leaks[:5])
                problems.append(f"Test was allowed to leak {_bytes(limit)} per site but {len(leaks)} site"
                                f"{'s' if len(leaks) != 1 else ''} leaked more:{rows}")
        if self.baseline is not None and item.nodeid in self.baseline:
            for device, before in self.baseline[item.nodeid].get("peak", {}).items():
                now = figures.peak(device)
                allowed = before * (1 + self.max_increase / 100)
                if now > allowed:
                    grown = (now - before) / before * 100 if before else float("inf")
                    problems.append(f"Test's peak on {device} grew from {before:,} B to {now:,} B (+{grown:.1f}%), "
                                    f"past the allowed {self.max_increase:g}%")
        return "\n".join(problems) or None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call" and report.passed and item.nodeid in self.failures:
            report.outcome = "failed"
            report.longrepr = "memtool: " + self.failures[item.nodeid]

    # ---- the session's end -------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter):
        if not self.results:
            return
        rows = []
        for nodeid, f in self.results.items():
            main_peak = sum(d["peak"] for d in f.devices.values())
            rows.append((main_peak, nodeid, f))
        rows.sort(key=lambda r: (-r[0], r[1]))
        top = self.config.getoption("memtool_top")
        shown = rows if top == 0 else rows[:top]
        tr = terminalreporter
        tr.section("memtool: memory per test (torch CPU, shared and CUDA memory)")
        tr.write_line(f"{'Peak':>12} {'Allocated':>12} {'Leaked':>12} {'Count':>7}  {'Device':<8} Test")
        for _, nodeid, f in shown:
            for p in f.processes:
                for device, d in sorted(p.get("devices", {}).items()):
                    who = nodeid if p is f.processes[0] else f"  {nodeid} (pid {p['pid']}, forked)"
                    leaked = d.get("leaked_bytes", d["current_bytes"])
                    tr.write_line(f"{_bytes(d['peak_bytes']):>12} {_bytes(d['allocated_bytes']):>12} "
                                  f"{_bytes(leaked):>12} {d['alloc_count']:>7}  {device:<8} {who}")
            if not f.devices:
                tr.write_line(f"{'0 B':>12} {'0 B':>12} {'0 B':>12} {0:>7}  {'-':<8} {nodeid}")
        if len(rows) > len(shown):
            tr.write_line(f"({len(rows) - len(shown)} more tests; --memtool-top 0 lists all)")
        if self.keep_traces:
            tr.write_line(f"traces: {self.trace_dir}")

    def pytest_unconfigure(self, config):
        if self.companion is not None:
            self.companion.close(raise_errors=False)
        saved = config.getoption("memtool_save")
        if saved:
            tests = {nodeid: {"peak": {d: v["peak"] for d, v in f.devices.items()},
                              "allocated": {d: v["allocated"] for d, v in f.devices.items()},
                              "leaked": {d: v["leaked"] for d, v in f.devices.items()}}
                     for nodeid, f in self.results.items()}
            tmp = f"{saved}.tmp-{os.getpid()}"
            with open(tmp, "w") as out:
                json.dump({"schema": _RESULTS_SCHEMA, "tests": tests}, out, indent=1, sort_keys=True)
            os.replace(tmp, saved)
        if not self.keep_traces:
            shutil.rmtree(self.trace_dir, ignore_errors=True)
