#!/usr/bin/env python3
"""What `pytest --memtool` costs a suite: TESTS trivial tests (each allocates one small
torch tensor), run by pytest bare, with `--memtool` (each test under memtool.track)
and with pytest-memray's `--memray`, in alternating rounds of the same invocation.
Goal (issue 52): --memtool at most 1.2x bare.

    bench/pytest_suite.py [--rounds 5] [--tests 200] [--python VENV_PYTHON] [--memtool BUILD/bin/memtool]

Prints per mode the median wall time of a whole pytest run (interpreter start and
torch's import included, as a user waits for it), the paired ratio to bare with its
95% interval (bench/stats.py), and the cost per test ((mode - bare) / TESTS, from the
medians). Every --memtool run must report each test in its table, or the script fails.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_suite(directory, tests):
    body = ["import torch", ""]
    for i in range(tests):
        body += [f"def test_{i}():", f"    x = torch.empty({1000 + i}, dtype=torch.uint8)", "    assert x.numel()", ""]
    with open(os.path.join(directory, "test_trivial.py"), "w") as f:
        f.write("\n".join(body))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--memtool", default=os.path.join(ROOT, "build", "bin", "memtool"))
    args = ap.parse_args()
    env = dict(os.environ, MEMTOOL_BIN=os.path.abspath(args.memtool),
               PYTHONPATH=os.path.join(ROOT, "python"))
    modes = {
        "bare": ["-p", "no:memray"],
        "memtool": ["-p", "no:memray", "-p", "memtool._pytest", "--memtool", "--memtool-top", "0"],
        "pytest-memray": ["--memray"],
    }
    times = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as d:
        write_suite(d, args.tests)
        for r in range(args.rounds):
            for mode, flags in modes.items():
                t0 = time.perf_counter()
                done = subprocess.run([args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags,
                                       "test_trivial.py"], cwd=d, env=env, capture_output=True, text=True)
                elapsed = time.perf_counter() - t0
                if done.returncode != 0:
                    sys.exit(f"pytest_suite.py: {mode} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
                if mode == "memtool" and done.stdout.count("test_trivial.py::test_") != args.tests:
                    sys.exit("pytest_suite.py: the --memtool table does not list every test:\n" + done.stdout[-2000:])
                times[mode].append(elapsed)
            print(f"round {r + 1}: " + ", ".join(f"{m} {times[m][-1]:.2f} s" for m in modes), flush=True)
    bare = statistics.median(times["bare"])
    print(f"\n{args.tests} trivial tests, {args.rounds} rounds")
    for mode in modes:
        med = statistics.median(times[mode])
        line = f"{mode:>14}: median {med:.2f} s"
        if mode != "bare":
            s = stats.summary(times[mode], times["bare"])
            interval = s["interval"]
            line += f", paired ratio {s['paired']:.3f}"
            if interval:
                line += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
            line += f", {(med - bare) / args.tests * 1e3:.2f} ms per test"
        print(line)


if __name__ == "__main__":
    main()
