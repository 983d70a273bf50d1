#!/usr/bin/env python3
"""What memtool attach costs a program after it lets go, and how long it takes.

Each round starts the loop program (bench/workloads/attach_loop.py) twice, one
after the other, in an order that turns each round: once bare, once attached to
by `memtool attach` and detached (Ctrl-C) before its loop starts. Each times its
own loop of N allocations; the goal is that the detached one runs at bare speed:
the median paired ratio (detached over that round's bare) with its 95% interval
(bench/stats.py). Also the median time from starting memtool attach to its
"attached" line, and from Ctrl-C to its exit (the trace written).

    bench/attach_cost.py [--rounds 25] [--loops 200000] [--python VENV_PYTHON]
                         [--memtool BUILD/bin/memtool]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = os.path.join(ROOT, "bench", "workloads", "attach_loop.py")


def one(python, loops, memtool=None, trace=None):
    """The loop's seconds; with `memtool`, attached to and detached first (and the
    attach's and the detach's seconds)."""
    program = subprocess.Popen([python, LOOP, str(loops)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    ready = program.stdout.readline().split()
    attach_s = detach_s = None
    if memtool:
        t0 = time.perf_counter()
        attach = subprocess.Popen([memtool, "attach", ready[1], "-q", "-o", trace], stdout=subprocess.PIPE,
                                  text=True)
        line = attach.stdout.readline()
        attach_s = time.perf_counter() - t0
        if not line.startswith("attached"):
            raise SystemExit(f"attach_cost: memtool attach said {line!r}")
        t1 = time.perf_counter()
        attach.send_signal(signal.SIGINT)
        if attach.wait() != 0:
            raise SystemExit("attach_cost: memtool attach failed")
        detach_s = time.perf_counter() - t1
    program.stdin.write("go\n")
    program.stdin.flush()
    seconds = float(program.stdout.readline())
    program.stdin.close()
    program.wait()
    return seconds, attach_s, detach_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--loops", type=int, default=200_000)
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--memtool", default=os.path.join(ROOT, "build", "bin", "memtool"))
    args = ap.parse_args()
    trace = os.path.join(tempfile.mkdtemp(prefix="memtool-attach-cost-"), "trace.json")
    bare, detached, attaches, detaches = [], [], [], []
    for r in range(args.rounds):
        order = ("bare", "detached") if r % 2 == 0 else ("detached", "bare")
        for mode in order:
            if mode == "bare":
                bare.append(one(args.python, args.loops)[0])
            else:
                s, a, d = one(args.python, args.loops, args.memtool, trace)
                detached.append(s)
                attaches.append(a)
                detaches.append(d)
    p = stats.summary(detached, bare)
    low, high = p["interval"] or (float("nan"), float("nan"))
    print(f"{args.rounds} rounds of {args.loops} allocations: bare {statistics.median(bare):.3f} s, "
          f"after a detach {statistics.median(detached):.3f} s; paired ratio {p['paired']:.3f} "
          f"(95%: {low:.3f}-{high:.3f})")
    print(f"memtool attach to 'attached': {statistics.median(attaches) * 1e3:.1f} ms (median); "
          f"Ctrl-C to the trace written: {statistics.median(detaches) * 1e3:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
