#!/usr/bin/env python3
"""What memtool adds to each process a program forks: a fork pool's or a DataLoader's
workers each pay it (bench/run.py's pool and dataloader time it inside the whole run).

A program that imported torch forks CHILDREN children one after another; each
allocates one tensor (its first allocation: under memtool, where its own stream
starts), runs one task (a 128x128 matrix through four matmul + tanh, ~22
allocations), and exits with os._exit. The parent reads each child's CPU time
(user + system, every thread) and page faults from wait4. Runs of every mode
alternate, so machine noise hits them alike. The faults are the steadier figure: within
a few of each other for every child of one run, where CPU time moves with the
machine, and on a VM each one is a trip to the host (~10 us here: bench/history/runs.md,
run 34). Under memtool they also move between runs (run 40), so compare the
medians of several rounds.

    bench/fork_cost.py [--rounds 5] [--children 20] [--build build] [--other DIR ...]

Prints, per mode, the median over rounds of each run's median child: CPU ms of
the first allocation and of the task (the child's main thread), and the child's
whole CPU time and page faults; and what memtool adds to each over bare. Each memtool run's
trace must hold every child as a complete process, or the script fails.
"""
import argparse
import json
import os
import statistics
import sys
import time

from builds import alternate, memtool_modes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's, with python3-torch
FIGURES = ("first allocation", "task", "child total", "child faults")


def worker(children):
    sys.path.insert(0, os.path.join(ROOT, "bench", "workloads"))
    import torch
    from pool import task  # bench/run.py's pool workers' task, the same one

    torch.set_num_threads(1)
    task(0, 8)  # the parent's own first allocations, before any fork
    read, write = os.pipe()
    rows = []
    for i in range(children):
        pid = os.fork()
        if pid == 0:
            clock = time.thread_time
            t0 = clock()
            torch.empty(10)
            t1 = clock()
            task(i, 128)
            t2 = clock()
            os.write(write, f"{t1 - t0} {t2 - t1}\n".encode())
            os._exit(0)
        _, status, usage = os.wait4(pid, 0)
        if status != 0:
            sys.exit(f"fork_cost.py: child {i} ended with status {status}")
        first, task_s = (float(v) for v in os.read(read, 200).split())
        rows.append((first * 1e3, task_s * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3, usage.ru_minflt))
    print(" ".join(f"{statistics.median(r[k] for r in rows):.3f}" for k in range(len(FIGURES))))


def check_trace(path, children, mode):
    """Every child is a complete process of the trace, its allocations all seen."""
    with open(path) as f:
        processes = json.load(f)["processes"]
    forked = [p for p in processes if p.get("forked")]
    broken = [p["pid"] for p in forked if not p["complete"] or p["stream"]["missed_events"]]
    if len(forked) != children or broken:
        sys.exit(f"fork_cost.py: {mode}'s trace has {len(forked)} of {children} children"
                 + (f"; incomplete: {broken}" if broken else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--other", action="append", default=[], help="another build directory to compare")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.children < 1 or a.rounds < 1:
        sys.exit("fork_cost.py: --children and --rounds must be at least 1")
    if a.worker:
        return worker(a.children)
    me = [PY, os.path.abspath(__file__), "--worker", "--children", str(a.children)]
    modes = memtool_modes("fork_cost.py", a.build, a.other)
    outputs = alternate("fork_cost.py", modes, me, a.rounds, "memtool-fork-cost-",
                        lambda trace, mode: check_trace(trace, a.children, mode))
    n = len(FIGURES)
    runs = {m: [[float(v) for v in out.split()[-n:]] for out in each] for m, each in outputs.items()}
    median = {m: [statistics.median(r[k] for r in values) for k in range(n)] for m, values in runs.items()}
    print(f"{a.children} children forked by a torch program, {a.rounds} rounds; CPU ms and page "
          "faults per child (median of the rounds' median child)")
    print("| mode | " + " | ".join(FIGURES) + " | " + " | ".join(f"added: {f}" for f in FIGURES) + " |")
    print("|---" * (1 + 2 * len(FIGURES)) + "|")
    for mode, m in median.items():
        added = ["" if mode == "bare" else f"{m[k] - median['bare'][k]:+.2f}" for k in range(n)]
        print(f"| {mode} | " + " | ".join(f"{v:.2f}" for v in m) + " | " + " | ".join(added) + " |")


if __name__ == "__main__":
    main()
