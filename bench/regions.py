#!/usr/bin/env python3
"""What pausing and resuming a CPU region costs, against the bare operations on the
same machine, in one invocation:

  backup none: memtool.pause vs the kernel releasing the same bytes
               (mprotect PROT_NONE + madvise MADV_DONTNEED on a mapping of our own);
               memtool.resume + touching every page vs the kernel re-faulting them
               (mprotect read/write + touching every page)
  backup disk: pause and resume bandwidth vs what `dd` with direct I/O writes and
               reads on the same filesystem (the backup directory's)
  verify:      a verified disk region's pause and resume (a checksum of every
               word at each, memtool.region(..., verify=True)) vs the same
               unverified, rounds interleaved

    bench/regions.py [--gib 1] [--rounds 5] [--build build] [--markdown FILE]

It runs itself under `memtool run` (the worker half, --worker) and prints medians.
Goals (issue 11): within 1.25x of the bare operations; at least 80% of dd's bandwidth.
Issue 56: verifying costs at most 10% of the copy's time.
"""
import argparse
import ctypes
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"  # Debian's, with python3-torch
PAGE = os.sysconf("SC_PAGE_SIZE")


def worker(gib, rounds):
    import memtool
    import torch

    size = gib << 30
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    PROT_NONE, PROT_RW, MADV_DONTNEED = 0, 3, 4

    def touch(t):  # every page written once
        t.view(torch.uint8)[::PAGE].fill_(1)

    results = {"none_pause": [], "none_resume": [], "bare_release": [], "bare_refault": [],
               "disk_pause": [], "disk_resume": [], "verify_pause": [], "verify_resume": []}
    # The bare operations on a mapping of our own, same size, touched the same way.
    bare = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(bare))
    bare_tensor = torch.frombuffer(bare, dtype=torch.uint8)
    with memtool.region("none", backup="none"):
        t_none = torch.empty(size, dtype=torch.uint8)
    with memtool.region("disk", backup="disk"):
        t_disk = torch.empty(size, dtype=torch.uint8)
    with memtool.region("verified", backup="disk", verify=True):
        t_verified = torch.empty(size, dtype=torch.uint8)
    t_disk.fill_(7)
    t_verified.fill_(7)
    for _ in range(rounds):
        touch(bare_tensor)
        start = time.perf_counter()
        libc.mprotect(address, size, PROT_NONE)
        libc.madvise(address, size, MADV_DONTNEED)
        results["bare_release"].append(time.perf_counter() - start)
        start = time.perf_counter()
        libc.mprotect(address, size, PROT_RW)
        touch(bare_tensor)
        results["bare_refault"].append(time.perf_counter() - start)

        touch(t_none)
        start = time.perf_counter()
        assert memtool.pause("none").ok
        results["none_pause"].append(time.perf_counter() - start)
        start = time.perf_counter()
        assert memtool.resume("none").ok
        touch(t_none)
        results["none_resume"].append(time.perf_counter() - start)

        start = time.perf_counter()
        r = memtool.pause("disk")
        assert r.ok, r.message
        results["disk_pause"].append(time.perf_counter() - start)
        start = time.perf_counter()
        r = memtool.resume("disk")
        assert r.ok, r.message
        results["disk_resume"].append(time.perf_counter() - start)

        start = time.perf_counter()
        r = memtool.pause("verified")
        assert r.ok, r.message
        results["verify_pause"].append(time.perf_counter() - start)
        start = time.perf_counter()
        r = memtool.resume("verified")  # VerifyError if it came back different
        results["verify_resume"].append(time.perf_counter() - start)
    assert int(t_disk[::PAGE].sum()) == 7 * (size // PAGE)  # the content came back
    print(json.dumps(results))


def dd_bandwidth(directory, gib, rounds):
    """Median bytes/s dd writes and reads with direct I/O in `directory`."""
    path = os.path.join(directory, "dd-probe")
    writes, reads = [], []
    for _ in range(rounds):
        for args, into in ((["if=/dev/zero", f"of={path}", "oflag=direct"], writes),
                           ([f"if={path}", "of=/dev/null", "iflag=direct"], reads)):
            start = time.perf_counter()
            subprocess.run(["dd", "bs=1M", f"count={gib * 1024}"] + args, check=True, capture_output=True)
            into.append((gib << 30) / (time.perf_counter() - start))
    os.unlink(path)
    return statistics.median(writes), statistics.median(reads)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", default="")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.gib, args.rounds)
    backups = tempfile.mkdtemp(prefix="memtool-bench-regions-", dir=os.environ.get("TMPDIR", "/tmp"))
    write_bw, read_bw = dd_bandwidth(backups, args.gib, args.rounds)
    out = subprocess.run([f"{args.build}/bin/memtool", "run", "-q", "--backup-dir", backups, "-o",
                          os.path.join(backups, "trace.json"), "--", PY, os.path.abspath(__file__), "--worker",
                          "--gib", str(args.gib), "--rounds", str(args.rounds)],
                         check=True, capture_output=True, text=True).stdout
    r = {k: statistics.median(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}
    size = args.gib << 30
    gib_s = lambda s: f"{args.gib / s:.2f} GiB/s"
    rows = [
        ("pause, backup none", r["none_pause"], "kernel release (mprotect + MADV_DONTNEED)", r["bare_release"]),
        ("resume + touch every page", r["none_resume"], "kernel re-fault (mprotect + touch every page)",
         r["bare_refault"]),
    ]
    lines = [f"{args.gib} GiB region, {args.rounds} rounds, medians; backup directory {backups}", "",
             "| operation | memtool s | bare operation | bare s | ratio |", "|---|---|---|---|---|"]
    for what, mine, bare_what, bare in rows:
        lines.append(f"| {what} | {mine:.3f} | {bare_what} | {bare:.3f} | {mine / bare:.2f}x |")
    lines += ["", "| disk backup | memtool | dd, direct I/O, same filesystem | fraction |", "|---|---|---|---|",
              f"| pause (write) | {gib_s(r['disk_pause'])} | {write_bw / 2**30:.2f} GiB/s | "
              f"{size / r['disk_pause'] / write_bw:.0%} |",
              f"| resume (read) | {gib_s(r['disk_resume'])} | {read_bw / 2**30:.2f} GiB/s | "
              f"{size / r['disk_resume'] / read_bw:.0%} |"]
    verified = r["verify_pause"] + r["verify_resume"]
    plain = r["disk_pause"] + r["disk_resume"]
    lines += ["", "| disk backup, pause + resume | verified s | unverified s | verifying's cost |",
              "|---|---|---|---|",
              f"| {args.gib} GiB | {verified:.3f} | {plain:.3f} | {verified / plain - 1:+.1%} of the copy |"]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    subprocess.run(["rm", "-rf", backups])


if __name__ == "__main__":
    sys.exit(main())
