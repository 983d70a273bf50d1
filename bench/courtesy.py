#!/usr/bin/env python3
"""What courtesy costs: seconds to yield a program's memory and to restore it, per
GiB, from outside (`memtool ctl PID yield` / `restore`), against the bandwidths
measured in the same invocation:

  cpu:  yield writes to disk, restore reads it back: against what `dd` with direct
        I/O writes and reads on the same filesystem (the backup directory's)
  cuda: yield --to host copies device memory to pinned host memory and restore
        copies it back: against torch's own pinned copies of the same bytes
        (device to pinned host, pinned host to device), timed in the worker

    bench/courtesy.py [--gib 1] [--rounds 5] [--device cpu|cuda] [--build build] [--markdown FILE]

The worker runs under `memtool run --pausable all` and holds GIB of tensors (in
64 MiB pieces, every page written) while it waits in pure Python, a safe point.
The figures are memtool's own timing of each operation (the reply's seconds:
parking, emptying caches, copies, releasing; not the CLI's start-up) and the
wall time of the `memtool ctl` command around it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from regions import dd_bandwidth  # bench/regions.py: the same dd measurement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIECE = 64 << 20


def worker(gib, device, flag):
    import torch

    pieces = [torch.full((PIECE // 4,), float(i), dtype=torch.float32, device=device)
              for i in range(gib * (1 << 30) // PIECE)]
    copies = {}
    if device == "cuda":
        # The bare operation: the same bytes to pinned host memory and back.
        host = torch.empty(gib << 30, dtype=torch.uint8, pin_memory=True)
        flat = torch.empty(gib << 30, dtype=torch.uint8, device=device)
        for name, dst, src in (("d2h", host, flat), ("h2d", flat, host)):
            times = []
            for _ in range(3):
                torch.cuda.synchronize()
                start = time.perf_counter()
                dst.copy_(src, non_blocking=True)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            copies[name] = (gib << 30) / statistics.median(times)
        del host, flat, dst, src  # the loop's names held them too: 2 GiB more to yield
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    print("ready", os.getpid(), json.dumps(copies), flush=True)
    while not os.path.exists(flag):
        pass
    ok = all(float(p[:: 1 << 16].sum()) == i * p[:: 1 << 16].numel() for i, p in enumerate(pieces))
    print("intact", ok, flush=True)


def ctl(memtool, env, *words):
    start = time.perf_counter()
    out = subprocess.run([memtool, "ctl", "--format", "json", *words], check=True, capture_output=True,
                         text=True, env=env).stdout
    wall = time.perf_counter() - start
    answer = json.loads(out)
    if answer["status"] != "ok" or not answer["body"].get("changed"):
        raise SystemExit(f"bench: ctl {' '.join(words)}: {out}")
    return answer["body"], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--python", default="/usr/bin/python3" if not os.environ.get("MEMTOOL_BENCH_PYTHON")
                    else os.environ["MEMTOOL_BENCH_PYTHON"], help="a python with torch (CUDA torch for cuda)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", default="")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.gib, args.device, args.worker)
    memtool = f"{args.build}/bin/memtool"
    scratch = tempfile.mkdtemp(prefix="memtool-bench-courtesy-", dir=os.environ.get("TMPDIR", "/tmp"))
    env = dict(os.environ, MEMTOOL_CONTROL_DIR=os.path.join(scratch, "control"))
    flag = os.path.join(scratch, "go")
    target = "disk" if args.device == "cpu" else "host"
    if args.device == "cpu":
        write_bw, read_bw = dd_bandwidth(scratch, args.gib, args.rounds)
    proc = subprocess.Popen([memtool, "run", "-q", "--pausable", "all", "--backup-dir", scratch, "-o",
                             os.path.join(scratch, "trace.json"), "--", args.python, os.path.abspath(__file__),
                             "--gib", str(args.gib), "--device", args.device, "--worker", flag],
                            stdout=subprocess.PIPE, text=True, env=env)
    words = proc.stdout.readline().split(maxsplit=2)
    if not words or words[0] != "ready":
        proc.kill()
        raise SystemExit("bench: the worker did not start")
    pid, copies = words[1], json.loads(words[2])
    results = {"yield_s": [], "yield_wall": [], "restore_s": [], "restore_wall": [], "bytes": []}
    first_yield = None
    for _ in range(args.rounds):
        body, wall = ctl(memtool, env, pid, "yield", "--to", target)
        first_yield = first_yield or body
        results["yield_s"].append(body["seconds"])
        results["yield_wall"].append(wall)
        results["bytes"].append(sum(d["bytes"] for d in body["devices"] if d["device"] != "cpu")
                                if args.device == "cuda" else body["bytes"])
        body, wall = ctl(memtool, env, pid, "restore")
        results["restore_s"].append(body["seconds"])
        results["restore_wall"].append(wall)
    open(flag, "w").close()
    rest = proc.stdout.read()
    if proc.wait() != 0 or "intact True" not in rest:
        raise SystemExit(f"bench: the worker failed: {rest}")
    subprocess.run(["rm", "-rf", scratch])

    med = {k: statistics.median(v) for k, v in results.items()}
    size = med["bytes"]
    per_gib = lambda s: s / (size / 2**30)
    if args.device == "cpu":
        bare_out, bare_in, bare_what = write_bw, read_bw, "dd, direct I/O, same filesystem"
    else:
        bare_out, bare_in, bare_what = copies["d2h"], copies["h2d"], "torch copy to/from pinned host"
    lines = [f"{args.device}: {size / 2**30:.2f} GiB yielded ({args.gib} GiB of tensors, "
             f"{args.gib * (1 << 30) // PIECE} pieces), {args.rounds} rounds, medians",
             "",
             f"| operation | memtool s/GiB | ctl wall s | memtool GiB/s | {bare_what} GiB/s | fraction |",
             "|---|---|---|---|---|---|",
             f"| yield --to {target} | {per_gib(med['yield_s']):.3f} | {med['yield_wall']:.3f} | "
             f"{size / med['yield_s'] / 2**30:.2f} | {bare_out / 2**30:.2f} | {size / med['yield_s'] / bare_out:.0%} |",
             f"| restore | {per_gib(med['restore_s']):.3f} | {med['restore_wall']:.3f} | "
             f"{size / med['restore_s'] / 2**30:.2f} | {bare_in / 2**30:.2f} | {size / med['restore_s'] / bare_in:.0%} |"]
    # What the first yield moved, device by device, and what each device still held.
    held = lambda d: (f", the process still resident {d['process_resident_bytes']:,} B" if "process_resident_bytes" in d
                      else f", the device still used {d['device_used_bytes']:,} B" if "device_used_bytes" in d else "")
    lines += ["", "first yield: " + "; ".join(f"{d['device']} {d['bytes']:,} B{held(d)}" for d in first_yield["devices"])
              + f" ({first_yield['allocations']} allocations)"]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
