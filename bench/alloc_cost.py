#!/usr/bin/env python3
"""What memtool adds to one allocation and free, timed inside the program: the loop
of 200,000 `torch.empty(64)` alone, without interpreter start-up, `import torch`,
the collector's start or the trace's writing (bench/run.py times the whole
process). Each run reports the least CPU time per iteration of 5 passes; runs of
every mode alternate, so machine noise hits them alike.

    bench/alloc_cost.py [--rounds 5] [--depth D] [--build build] [--other DIR ...] [--memtool-args "..."]

--depth D runs the loop under D more Python frames (a deep stack: the frames read at
every allocation).

Modes: bare, `memtool run` from --build, and `memtool run` from each --other build
directory (an earlier build to compare with: its bin/memtool). Prints, per mode,
the least and every run's ns per iteration, and the least minus bare's: the
nanoseconds added per allocation/free pair, Python and native stacks included.
"""
import argparse
import os
import sys
import time

from builds import alternate, memtool_modes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's, with python3-torch
N = 200_000


def below(depth, f):
    return f() if depth == 0 else below(depth - 1, f)


def worker(depth):
    sys.path.insert(0, os.path.join(ROOT, "bench", "workloads"))
    from small_tensors import loop  # bench/run.py's small_tensors, the same loop

    def passes():
        loop(1000)  # the first allocations: code objects, stack nodes, modules
        best = None
        for _ in range(5):
            start = time.process_time()
            loop(N)
            ns = (time.process_time() - start) / N * 1e9
            best = ns if best is None else min(best, ns)
        return best

    print(f"{below(depth, passes):.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--other", action="append", default=[], help="another build directory to compare")
    ap.add_argument("--memtool-args", default="", help="options for memtool run (e.g. --no-native)")
    ap.add_argument("--depth", type=int, default=0, help="Python frames above the loop")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.depth)
    me = [PY, os.path.abspath(__file__), "--worker", "--depth", str(a.depth)]
    modes = memtool_modes("alloc_cost.py", a.build, a.other, a.memtool_args.split())
    outputs = alternate("alloc_cost.py", modes, me, a.rounds, "memtool-alloc-cost-")
    runs = {m: [float(out.split()[-1]) for out in each] for m, each in outputs.items()}
    bare = min(runs["bare"])
    print(f"{N:,} x torch.empty(64) under {a.depth} more Python frames, {a.rounds} rounds, CPU ns per "
          "iteration (least of 5 passes a run)")
    print("| mode | least | added over bare | every run |\n|---|---|---|---|")
    for mode, values in runs.items():
        added = "" if mode == "bare" else f"{min(values) - bare:.0f}"
        print(f"| {mode} | {min(values):.0f} | {added} | {' '.join(f'{v:.0f}' for v in values)} |")


if __name__ == "__main__":
    main()
