#!/usr/bin/env python3
"""What memtool.track() costs to start and to leave: ROUNDS tracks of a block that
allocates one 3,000,000-byte storage, in the test venv's Python (torch imported
first). Prints the median start, the median stop without waiting for the trace
(wait=False), and the median wait, with native stacks and without.

    bench/track_cost.py [--rounds 30] [--python VENV_PYTHON] [--memtool BUILD/bin/memtool]
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = r"""
import statistics, sys, tempfile, time
import torch
import memtool

rounds = int(sys.argv[1])
path = tempfile.mktemp(suffix=".json")
for native in (False, True):
    start, stop, wait = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        t = memtool.track(path, native=native, wait=False).start()
        t1 = time.perf_counter()
        x = torch.empty(3_000_000, dtype=torch.uint8)
        del x
        t2 = time.perf_counter()
        t.stop()
        t3 = time.perf_counter()
        t.wait()
        t4 = time.perf_counter()
        start.append(t1 - t0)
        stop.append(t3 - t2)
        wait.append(t4 - t3)
    ms = lambda v: statistics.median(v) * 1e3
    print(f"native={native}: start {ms(start):.1f} ms, stop {ms(stop):.1f} ms, wait for the trace {ms(wait):.1f} ms")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--memtool", default=os.path.join(ROOT, "build", "bin", "memtool"))
    args = ap.parse_args()
    env = dict(os.environ, MEMTOOL_BIN=os.path.abspath(args.memtool), PYTHONPATH=os.path.join(ROOT, "python"))
    sys.exit(subprocess.run([args.python, "-c", PROGRAM, str(args.rounds)], env=env).returncode)


if __name__ == "__main__":
    main()
