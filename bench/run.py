#!/usr/bin/env python3
"""memtool's cost against a bare run and against the tools users would pick instead.

In one invocation, for each workload, runs round after round of: bare, memtool
(default, --no-native, --no-python, (no folding), --pausable all) and the peers
(memray, memray --native, PyTorch's profiler with profile_memory=True and
with_stack=True, heaptrack, tracemalloc, scalene, memory-profiler's mprof run:
modes() says how each is run, and how it follows forked workers), in turn, so that
machine noise hits every mode alike (the order, bare's place in it too, turns by
one a round, so that none always runs first, or right after another). Reports, as
medians of the rounds: the wall time of the whole process and its CPU time (user +
system of the process and every child it reaped: for memtool, the CLI and the
target together), each with its ratio to bare; the paired ratio (the median of
each round's run over that round's bare run, with its 95% confidence interval:
bench/stats.py), which the goals in bench/RESULTS.md are judged by from run 30 on,
and the least run over bare's least; the CLI's own CPU time as a share of the
target's (trace.json's cli_cpu_s and cpu_s); the nanoseconds added per tracked
allocation (from wall and from CPU time); and memtool's own memory: the target's
peak RSS over bare, and the CLI's peak RSS.

`--modes "memtool,bare (again)"` adds a second bare run to each round: what a
mode that costs nothing measures against bare here (the bench's own floor).

    bench/run.py [--runs 7] [--quick | --peers-quick] [--workloads small_tensors,training]
                 [--modes ...] [--python PY] [--scale F] [--limit X] [--limit-min S]
                 [--baseline OTHER_BUILD] [--markdown FILE]

The Python workloads run on --python: by default build/venv/bin/python (the
venv scripts/venv.sh makes: torch 2.x, the peers) where it exists, else
/usr/bin/python3 (Debian's torch 1.13, where only torch.profiler and heaptrack
are there to compare). A peer its interpreter cannot import is left out.

--quick: tiny sizes, one round, no timing conclusions: it only proves the
scripts, every workload and every memtool mode still work, and checks memtool's
exact allocation counts (CI runs this). Bare and memtool's modes only.
--peers-quick: tiny sizes, one round, bare and every peer: each peer's command
line works here (not in CI: the peers take minutes even at tiny sizes).
Needs a build in ./build (or --build DIR).

A comparison tool that fails, or runs past --limit times the latest bare run
(--limit-min seconds at least), is reported as failed in its row and not run
again on that workload; bare or memtool failing ends the bench.
--scale F multiplies the documented sizes (loop iterations, training steps,
batches, pool tasks) to fit every peer into an invocation's time.
"""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PY = "/usr/bin/python3"  # Debian's, with python3-torch 1.13
# The workloads that fork: each peer runs in the mode its users would pick to
# follow the children (see modes()).
FORKING = {"dataloader", "pool"}


def default_python(build):
    """The venv's interpreter (scripts/venv.sh makes build/venv: torch 2.x and the
    peers), the build's first, else Debian's."""
    for d in (build, os.path.join(ROOT, "build")):
        py = os.path.join(d, "venv", "bin", "python")
        if os.path.exists(py):
            return py
    return SYSTEM_PY


def workloads(build, quick, py, scale=1.0):
    """{name: (argv, python?, exact count)}. `scale` multiplies the documented sizes
    (loop iterations, steps, batches, tasks; tensor shapes stay): to fit every peer
    into one invocation's time."""
    w = os.path.join(ROOT, "bench", "workloads")

    def sized(*counts):
        return [] if scale == 1.0 else [str(max(1, round(c * scale))) for c in counts]

    def rest(args):  # the arguments before a scaled one, at their defaults
        return [] if scale == 1.0 else args

    n = 2000 if quick else max(1, round(200_000 * scale))
    steps = 2 if quick else max(1, round(40 * scale))
    return {
        # name: (argv, python?, exact CPU allocations memtool must see, or None).
        # alloc_stress measures memtool's stream alone: no other tool runs it.
        "small_tensors": ([py, f"{w}/small_tensors.py", str(n)], True, n),
        "training": ([py, f"{w}/training.py", str(steps)], True, None),
        "threads": ([py, f"{w}/threads.py", str(n)], True, n),
        "deep_stack": ([py, f"{w}/deep_stack.py", str(n)], True, n),
        "libtorch_loop": ([f"{build}/bin/libtorch_sample", str(n)], False, n + 3),
        "alloc_stress_10M": ([f"{build}/bin/alloc_stress", str(20_000 if quick else 10_000_000)], False,
                             20_000 if quick else 10_000_000),
        # Real programs nobody here wrote the loops of (torchvision, torch.nn, DataLoader).
        # The DataLoader's workers are forked: memtool records each as a process of
        # the run, and the run's time and CPU count them all.
        "resnet18": ([py, f"{w}/resnet18.py"] + (["1", "2", "32"] if quick else sized(4) + rest(["16", "128"])),
                     True, None),
        "transformer": ([py, f"{w}/transformer.py"] + (["1", "2", "16"] if quick else sized(10)), True, None),
        "dataloader": ([py, f"{w}/dataloader.py"] + (["2", "4"] if quick else sized(40)), True, None),
        # Eight forked workers mapping the same libtorch: the CLI's cost per process.
        "pool": ([py, f"{w}/pool.py"] + (["2", "4", "16"] if quick else rest(["8"]) + sized(256)), True, None),
    }


def have_module(python, module):
    """Whether `python` can import `module` (a peer installed in its environment)."""
    return subprocess.run([python, "-c", f"import {module}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def peers_available(python):
    """The peers this machine has: {mode name: True}, for modes() to offer."""
    have = {"torch.profiler": True, "heaptrack": shutil.which("heaptrack") is not None}
    for mode, module in (("memray", "memray"), ("tracemalloc", "tracemalloc"), ("scalene", "scalene"),
                         ("memory-profiler", "memory_profiler")):
        have[mode] = have_module(python, module)
    have["memray --native"] = have["memray"]
    return have


def modes(build, python, peers, tmp, compare=True, baseline="", forks=False):
    """{mode: argv -> argv}, and the trace path memtool's modes write. `python`:
    the workload is a Python script (argv[0] its interpreter); `peers`: from
    peers_available(); `forks`: the workload forks workers, and each peer that can
    follow them is run the way its users would to do so."""
    memtool = f"{build}/bin/memtool"
    trace = os.path.join(tmp, "trace.json")
    out = os.path.join(tmp, "peer.out")  # each peer's own output, removed after every run
    m = {
        "bare": lambda argv: argv,
        # Bare again, in the turning order: the bench's own floor, what a mode that
        # costs nothing measures against bare (the order, the noise).
        "bare (again)": lambda argv: argv,
        "memtool": lambda argv: [memtool, "run", "-q", "-o", trace, "--"] + argv,
        "memtool --no-native": lambda argv: [memtool, "run", "-q", "--no-native", "-o", trace, "--"] + argv,
        "memtool --no-python": lambda argv: [memtool, "run", "-q", "--no-python", "-o", trace, "--"] + argv,
        # Every event sent as its own record (MEMTOOL_FOLD=0): what Window records save.
        "memtool (no folding)": lambda argv: ["env", "MEMTOOL_FOLD=0", memtool, "run", "-q", "-o", trace, "--"] + argv,
        # Every CPU storage served from pausable memory (courtesy: memtool ctl PID yield).
        "memtool --pausable all": lambda argv: [memtool, "run", "-q", "--pausable", "all", "-o", trace, "--"] + argv,
    }
    if python:
        # The same collector loaded by the program itself (memtool.track() around the
        # whole script, bench/workloads/track_run.py): the in-process start's cost.
        track_env = ["env", f"MEMTOOL_BIN={memtool}", f"PYTHONPATH={os.path.join(ROOT, 'python')}"]
        m["memtool.track()"] = lambda argv: track_env + [argv[0], os.path.join(ROOT, "bench", "workloads",
                                                                              "track_run.py"), trace] + argv[1:]
    if baseline:  # another build of memtool (before a change), in the same rounds
        m["memtool (baseline build)"] = lambda argv: [f"{baseline}/bin/memtool", "run", "-q", "-o", trace, "--"] + argv
    if not compare:
        return m, trace
    w = os.path.join(ROOT, "bench", "workloads")
    if python:
        # Every malloc with its Python stack (memray's default), and with the native
        # frames too (--native: what memtool records by default); --follow-fork
        # records each forked worker in a file of its own.
        follow = ["--follow-fork"] if forks else []
        if peers.get("memray"):
            m["memray"] = lambda argv: [argv[0], "-m", "memray", "run", "-q", "-f", *follow, "-o", out] + argv[1:]
            m["memray --native"] = lambda argv: [argv[0], "-m", "memray", "run", "-q", "-f", "--native", *follow,
                                                 "-o", out] + argv[1:]
        # profile_memory=True, with_stack=True; the process that started it only.
        m["torch.profiler"] = lambda argv: [argv[0], f"{w}/torch_profiler.py"] + argv[1:]
    if peers.get("heaptrack"):
        # heaptrack records the process it starts; its children run untracked.
        m["heaptrack"] = lambda argv: ["heaptrack", "-o", out] + argv
    if python:
        # tracemalloc.start() (one frame), a snapshot's top lines at the end: Python's own
        # allocator only (objects, not c10's storages). Forked workers inherit the
        # tracing; none takes a snapshot.
        if peers.get("tracemalloc"):
            m["tracemalloc"] = lambda argv: [argv[0], f"{w}/tracemalloc_run.py"] + argv[1:]
        # `scalene run` (CPU and memory, its sampling allocator: a sample every
        # 1 MiB allocated), what its README starts with; it follows multiprocessing
        # workers by itself.
        if peers.get("scalene"):
            m["scalene"] = lambda argv: [argv[0], "-m", "scalene", "run", "-o", out, argv[1], "---"] + argv[2:]
        # `mprof run`: the whole program's RSS every 0.1 s, no code changed (the line
        # mode needs @profile put on each function); --include-children sums the
        # forked workers' RSS in.
        if peers.get("memory-profiler"):
            children = ["--include-children"] if forks else []
            m["memory-profiler"] = lambda argv: [argv[0], "-m", "mprof", "run", "--exit-code", *children,
                                                 "-o", out] + argv
    return m, trace


def clear_peer_output(tmp):
    """Removes what a peer wrote (memray's files, one a forked worker, heaptrack's,
    scalene's, mprof's), so that none fills the disk or is read by the next run."""
    for entry in os.listdir(tmp):
        if entry.startswith("peer.out"):
            os.remove(os.path.join(tmp, entry))


class RunFailed(Exception):
    """A run exited non-zero; `reason` is its last line of stderr."""

    def __init__(self, argv, err):
        lines = [line for line in err.splitlines() if line.strip()]
        self.reason = lines[-1].strip() if lines else "no message"
        super().__init__(f"bench: {' '.join(argv)} failed:\n{err}")


def is_comparison(mode):
    """Another tool, run for comparison: its failure is reported, not fatal."""
    return not mode.startswith("bare") and not mode.startswith("memtool")


def descendants(pid):
    """The process ids under `pid`, from /proc (children before their own)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    # pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def run_once(argv, limit_s=None):
    """(wall s, peak RSS bytes, CPU s) of one run. With `limit_s`, a run still going
    then is killed with everything it started, and fails as timed out."""
    start = time.perf_counter()
    # close_fds=False lets subprocess use posix_spawn, the cheapest way to start it.
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, close_fds=False)
    timed_out, reaped = threading.Event(), threading.Event()

    def kill_tree():
        timed_out.set()
        # The deepest first, and the run itself a moment later, so that every
        # process is reaped by its own parent (none is left a zombie of init's).
        for pid in reversed(descendants(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
        if not reaped.is_set():  # Popen.kill() would poll, and could reap it before wait4
            os.kill(proc.pid, signal.SIGKILL)

    timer = threading.Timer(limit_s, kill_tree) if limit_s else None
    if timer:
        timer.start()
    # wait4's usage includes the children the process reaped: memtool's target,
    # the DataLoader's workers.
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    reaped.set()
    if timer:
        timer.cancel()
        timer.join()
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if timed_out.is_set():
        raise RunFailed(argv, err + f"\ntimed out after {limit_s:.0f} s (killed)")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RunFailed(argv, err)
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, usage.ru_minflt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workloads", default="", help="comma-separated subset")
    ap.add_argument("--modes", default="", help="comma-separated subset (bare is always run)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", default="")
    ap.add_argument("--baseline", default="", help="another build directory (before a change): its memtool "
                    "runs beside this one's, in the same rounds")
    ap.add_argument("--python", default="", help="the interpreter the Python workloads run on (default: "
                    "build/venv/bin/python where it exists, else /usr/bin/python3)")
    ap.add_argument("--peers-quick", action="store_true", help="tiny sizes, one round, bare and every peer: "
                    "each peer's command line works here (no timing; not in CI)")
    ap.add_argument("--limit", type=float, default=0, help="a peer's run is killed, and its row failed, past "
                    "this many times the latest bare run (default 200; 30 under --quick and --peers-quick)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the workloads' documented sizes "
                    "(iterations, steps, batches, tasks): to fit every peer into one invocation's time")
    ap.add_argument("--limit-min", type=float, default=60.0, help="seconds a peer's run gets at least (default 60)")
    args = ap.parse_args()
    small = args.quick or args.peers_quick
    runs = 1 if small else args.runs
    factor = args.limit or (30 if small else 200)
    python_exe = args.python or default_python(args.build)
    peers = peers_available(python_exe)
    print(f"bench: Python workloads on {python_exe}; peers: "
          + ", ".join(f"{k}{'' if v else ' (not installed)'}" for k, v in peers.items()), file=sys.stderr)
    load_start = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="memtool-bench-")
    selected = [s for s in args.workloads.split(",") if s]
    rows = []
    failures = 0
    for name, (argv, python, expected) in workloads(args.build, small, python_exe, args.scale).items():
        if selected and name not in selected:
            continue
        # alloc_stress measures memtool's stream alone; --quick checks memtool, not its peers.
        compare = not args.quick and not name.startswith("alloc_stress")
        mode_table, trace_path = modes(args.build, python, peers, tmp, compare=compare,
                                       baseline=args.baseline, forks=name in FORKING)
        if args.modes:
            keep = set(args.modes.split(",")) | {"bare"}
            mode_table = {k: v for k, v in mode_table.items() if k in keep}
        elif args.peers_quick:  # bare and the peers: --quick checks memtool's modes
            mode_table = {k: v for k, v in mode_table.items() if k == "bare" or is_comparison(k)}
        else:
            mode_table.pop("bare (again)")  # only when asked for
        walls = {m: [] for m in mode_table}
        cpus = {m: [] for m in mode_table}
        faults = {m: [] for m in mode_table}
        rss = {m: [] for m in mode_table}
        extra = {}
        failed = {}  # comparison mode -> why it failed (it is not run again)
        # Every mode, bare too, in an order that turns by one each round: no mode
        # always runs first, last, or right after another. (With bare first in every
        # round, a second bare run measured 1.039 of the first over 21 rounds of pool,
        # run 38: the first run of a round has an edge, which every mode's ratio took
        # as its own cost.) Bare runs first in the first round: its time sets the
        # comparison tools' limit, from its latest run.
        order = list(mode_table.items())
        for round_index in range(runs):
            turn = round_index % len(order)
            for mode, wrap in order[turn:] + order[:turn]:
                if mode in failed:
                    continue
                # A comparison tool may hang where memtool does not (heaptrack 1.4 on the
                # DataLoader's forked workers: they block on a futex). It gets --limit
                # times the latest bare run (200 by default: torch.profiler is ~100x on
                # deep_stack; 30 at tiny sizes, where start-up dominates), --limit-min
                # seconds at least.
                limit = max(args.limit_min, factor * walls["bare"][-1]) if is_comparison(mode) else None
                try:
                    wall, maxrss, cpu, minflt = run_once(wrap(argv), limit)
                except RunFailed as e:
                    if not is_comparison(mode):
                        raise SystemExit(str(e))
                    # e.g. Debian's torch 1.13 profiler with_stack on resnet18: its
                    # stack strings fail to decode (UnicodeDecodeError) after the run.
                    # Or a time-out (see `limit`).
                    if limit and "timed out" in e.reason:  # a lower bound on its ratio
                        e.reason += f", over {factor:g}x bare's latest run"
                    print(f"bench: {name} under {mode} failed: {e.reason}", file=sys.stderr)
                    failed[mode] = e.reason
                    if args.peers_quick:
                        failures += 1
                    continue
                finally:
                    clear_peer_output(tmp)
                walls[mode].append(wall)
                cpus[mode].append(cpu)
                faults[mode].append(minflt)
                if mode.startswith("memtool"):
                    trace = json.load(open(trace_path))
                    proc = trace["processes"][0]
                    allocs = proc["devices"].get("cpu", {}).get("alloc_count", 0)
                    # Every allocation recorded, in every process (a DataLoader's
                    # workers are recorded too) and on every device (not PyTorch's
                    # CUDA pools, "cuda:N.active": the same memory seen twice).
                    tracked = sum(d.get("alloc_count", 0) for p in trace["processes"]
                                  for name, d in p["devices"].items() if "." not in name)
                    extra.setdefault(mode, {"allocs": tracked, "cli_rss": [], "target_rss": [], "cli_share": []})
                    extra[mode]["cli_rss"].append(trace["cli_max_rss_bytes"])
                    # A tracked process is not memtool's child (0: unknown): the runner's
                    # own reading of its child, the program, stands in.
                    extra[mode]["target_rss"].append(proc["max_rss_bytes"] or maxrss)
                    if "cli_cpu_s" in trace and proc.get("cpu_s"):  # builds from before have none
                        extra[mode]["cli_share"].append(trace["cli_cpu_s"] / proc["cpu_s"])
                    if expected is not None and allocs != expected:
                        print(f"bench: {name} under {mode}: {allocs} allocations recorded, expected {expected}",
                              file=sys.stderr)
                        failures += 1
                    if not proc["complete"]:
                        print(f"bench: {name} under {mode}: trace incomplete", file=sys.stderr)
                        failures += 1
                else:
                    rss[mode].append(maxrss)
        bare = statistics.median(walls["bare"])
        bare_cpu = statistics.median(cpus["bare"])
        bare_rss = statistics.median(rss["bare"])
        for mode in mode_table:
            if mode in failed:
                row = {"workload": name, "mode": mode, "failed": failed[mode]}
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            med = statistics.median(walls[mode])
            cpu = statistics.median(cpus[mode])
            # Minor page faults, every process of the run: the DataLoader's vary from
            # 100,000 to 360,000 between runs of the same mode, bare too, and its CPU
            # time with them.
            row = {"workload": name, "mode": mode, "median_s": med, "ratio": med / bare, "cpu_s": cpu,
                   "cpu_ratio": cpu / bare_cpu, "runs": len(walls[mode]),
                   "minor_faults": statistics.median(faults[mode]),
                   "minor_faults_range": [min(faults[mode]), max(faults[mode])],
                   "walls": walls[mode], "cpus": cpus[mode]}  # every round's, in order
            if mode != "bare":
                # Each round's run over that round's bare run: what the goals are judged by
                # (bench/stats.py says why).
                p = stats.summary(walls[mode], walls["bare"])
                row["paired_ratio"], row["paired_interval"], row["least_ratio"] = \
                    p["paired"], p["interval"], p["least"]
                row["paired_cpu_ratio"] = stats.summary(cpus[mode], cpus["bare"])["paired"]
            if mode.startswith("memtool"):
                e = extra[mode]
                row["allocs"] = e["allocs"]
                row["ns_per_alloc"] = (med - bare) / e["allocs"] * 1e9 if e["allocs"] else None
                row["cpu_ns_per_alloc"] = (cpu - bare_cpu) / e["allocs"] * 1e9 if e["allocs"] else None
                if e["cli_share"]:
                    row["cli_cpu_share"] = statistics.median(e["cli_share"])
                # At exec the kernel folds the old image's high-water mark into ru_maxrss,
                # so the launcher (this runner, ~15 MiB; memtool's CLI, ~7 MiB) counts
                # too: the difference only means something for targets far larger.
                if bare_rss >= 64 << 20:
                    row["target_rss_over_bare"] = statistics.median(e["target_rss"]) - bare_rss
                row["cli_rss"] = statistics.median(e["cli_rss"])
            elif mode != "bare" and extra:
                allocs = next(iter(extra.values()))["allocs"]
                row["ns_per_alloc"] = (med - bare) / allocs * 1e9 if allocs else None
                row["cpu_ns_per_alloc"] = (cpu - bare_cpu) / allocs * 1e9 if allocs else None
            rows.append(row)
            print(json.dumps(row), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)

    def mib(b):
        return f"{b / 1048576:.1f}"

    def ns(r, key):
        return f"{r[key]:.0f}" if r.get(key) is not None else ""

    lines = [
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()} (runner); {runs} rounds, medians; wall and CPU time of the whole "
        "process (for memtool: the CLI and the target).",
        "",
        f"Python workloads on {python_exe}; load average (1, 5, 15 min) at the start "
        f"{' '.join(f'{x:.2f}' for x in load_start)}, at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        "Paired: the median of each round's ratio to that round's bare run, with the 95% distribution-free "
        "interval for it (bench/stats.py; none under 6 rounds); least: the least run over bare's least.",
        "",
        "| workload | mode | wall s | wall ratio | paired wall ratio (95%) | least | CPU s | CPU ratio "
        "| paired CPU ratio | CLI CPU / target's | ns added per alloc, wall "
        "| ns added per alloc, CPU | target RSS over bare, MiB | memtool CLI RSS, MiB | minor faults, thousands: "
        "median (range) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "failed" in r:
            why = r["failed"].replace("|", "/")[:120]
            lines.append(f"| {r['workload']} | {r['mode']} | failed: {why} | | | | | | | | | | | | |")
            continue
        lo, hi = r["minor_faults_range"]
        flt = f"{r['minor_faults'] / 1000:.0f} ({lo / 1000:.0f}-{hi / 1000:.0f})"
        share = f"{100 * r['cli_cpu_share']:.1f}%" if "cli_cpu_share" in r else ""
        trss = mib(r["target_rss_over_bare"]) if "target_rss_over_bare" in r else ("n/a" if "cli_rss" in r else "")
        crss = mib(r["cli_rss"]) if "cli_rss" in r else ""
        paired = least = paired_cpu = ""
        if r.get("paired_ratio") is not None:
            iv = r["paired_interval"]
            paired = f"{r['paired_ratio']:.3f}" + (f" ({iv[0]:.3f}-{iv[1]:.3f})" if iv else "")
            least = f"{r['least_ratio']:.3f}"
            paired_cpu = f"{r['paired_cpu_ratio']:.3f}"
        lines.append(f"| {r['workload']} | {r['mode']} | {r['median_s']:.3f} | {r['ratio']:.3f} | {paired} | {least} "
                     f"| {r['cpu_s']:.3f} | {r['cpu_ratio']:.3f} | {paired_cpu} | {share} "
                     f"| {ns(r, 'ns_per_alloc')} | {ns(r, 'cpu_ns_per_alloc')} "
                     f"| {trss} | {crss} | {flt} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if failures:
        raise SystemExit(f"bench: {failures} check(s) failed")


if __name__ == "__main__":
    main()
