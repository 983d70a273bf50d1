#!/usr/bin/env python3
"""What the event log (memtool run --events) costs, on the small-tensor loop
(bench/workloads/small_tensors.py, 200,000 temporaries: 400,000 events): bytes
on disk per event (the log's size over the events it holds; goal at most 8), and
memory run's own CPU seconds (trace.json's cli_cpu_s) against the target's
(cpu_s, from wait4; goal: the CLI at most 5% of the target's) with --events all,
--events 1000 and without, in the same invocation, ROUNDS times each. Bytes and
CPU seconds are counted, not times, so the machine's noise enters only the CPU
share, which the rounds' median steadies.

    bench/events_cost.py [--rounds 5] [--n 200000] [--python VENV_PYTHON] [--memtool BUILD/bin/memtool]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = os.path.join(ROOT, "bench", "workloads", "small_tensors.py")


def one_run(memtool, python, n, events):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.json")
        argv = [memtool, "run", "-q", "-o", out]
        if events:
            argv += ["--events", events]
        subprocess.run(argv + ["--", python, WORKLOAD, str(n)], check=True, stdout=subprocess.DEVNULL)
        trace = json.load(open(out))
        p = trace["processes"][0]
        log = os.path.join(d, trace["events_file"]) if trace.get("events_file") else None
        size = os.path.getsize(log) if log else 0
        kept = p.get("events", {}).get("kept", 0)
        return trace["cli_cpu_s"], p["cpu_s"], size, kept


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--memtool", default=os.path.join(ROOT, "build", "bin", "memtool"))
    a = ap.parse_args()
    share = {"none": [], "1000": [], "all": []}
    per_event = []
    for _ in range(a.rounds):
        for mode in share:
            cli, target, size, kept = one_run(a.memtool, a.python, a.n, None if mode == "none" else mode)
            share[mode].append(cli / target)
            if mode == "all":
                per_event.append(size / kept)
            print(f"  --events {mode}: CLI {cli:.3f} s, target {target:.3f} s, log {size} B "
                  f"for {kept} events", flush=True)
    for mode, shares in share.items():
        print(f"--events {mode}: the CLI's CPU is {statistics.median(shares) * 100:.2f}% of the "
              f"target's (median of {a.rounds}; goal <= 5%)")
    print(f"--events all: {statistics.median(per_event):.3f} bytes per event on disk (goal <= 8)")


if __name__ == "__main__":
    sys.exit(main())
