#!/usr/bin/env python3
"""What memtool run's polling (--poll, a policy's interval_ms) costs: memtool run's
own CPU seconds (trace.json's cli_cpu_s) over a program that holds still for
SECONDS, polled every 20 ms against not polled, in the same invocation, ROUNDS
times each. The difference over the rounds polled is the CPU one round costs;
at the default interval of 200 ms that is the share of one core it takes
(goal: at most 0.5%). Counting CPU seconds of a fixed number of rounds, not
timing the program, so the machine's noise does not enter the ratio.

    bench/poll_cost.py [--rounds 5] [--seconds 10] [--python VENV_PYTHON] [--memtool BUILD/bin/memtool]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Still, with a stream open (a tracked storage) so that its RSS is polled too.
PROGRAM = "import sys, time, torch; x = torch.ones(1000); time.sleep(float(sys.argv[1]))"


def cli_cpu(memtool, python, seconds, poll_ms):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "t.json")
        argv = [memtool, "run", "-q", "-o", out]
        if poll_ms:
            argv += ["--poll", str(poll_ms)]
        subprocess.run(argv + ["--", python, "-c", PROGRAM, str(seconds)], check=True)
        trace = json.load(open(out))
        rounds = trace.get("polls", {}).get("rounds", 0)
        return trace["cli_cpu_s"], rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "venv", "bin", "python"))
    ap.add_argument("--memtool", default=os.path.join(ROOT, "build", "bin", "memtool"))
    a = ap.parse_args()
    per_round = []
    for _ in range(a.rounds):
        bare, _ = cli_cpu(a.memtool, a.python, a.seconds, 0)
        polled, rounds = cli_cpu(a.memtool, a.python, a.seconds, 20)
        per_round.append((polled - bare) / rounds)
        print(f"  not polled {bare:.3f} s, polled {polled:.3f} s over {rounds} rounds", flush=True)
    us = statistics.median(per_round) * 1e6
    print(f"one polling round: {us:.1f} us of CPU (median of {a.rounds}); "
          f"every 200 ms: {us / 200e3 * 100:.3f}% of a core (goal <= 0.5%)")


if __name__ == "__main__":
    sys.exit(main())
