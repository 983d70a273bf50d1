"""The same bytes as the peers (ctest `peers`): memtool's CPU figures for torch
storages, made by c10::alloc_cpu, against memray's (`memray run --native`, read
with memray.FileReader) and torch.profiler's (profile_memory=True), byte for byte.

Each tool runs the same program in a process of its own: resnet_train.py (resnet18
built and trained three steps, under torch.profiler in every run) bare, under
memtool and under memray; loader_workers.py (a DataLoader with two forked
workers) under memtool and under `memray run --follow-fork`. What is compared, and
why each filter is right:

- memtool's `cpu` device counts libc10's own posix_memalign and free calls (its
  GOT slots, collectors/preload/AllocatorHooks.cpp): c10::alloc_cpu and
  c10::free_cpu, nothing else. memray records every allocation of the process;
  its share here is the allocations whose native stack passes through
  c10::alloc_cpu (each must be a posix_memalign) and the frees of those
  addresses while they are live (a fork child's frees of its parent's storages
  are no allocation of its own, as memtool's fork children count them).
- Totals and counts: every such allocation of a process. Peak: the most live
  bytes of such storages at any moment of a process, memtool's devices.cpu
  peak_bytes and the running sum over memray's records, in their order. Live at
  the end: memtool's leaked_bytes (at interpreter finalization; for a worker,
  which ends in os._exit, at the end of its stream) against what memray held
  when it stopped tracking.
- Per stack: memtool's hotspots against memray's records, grouped by the stack
  memtool would write (peer_figures.memray_stack_key): native frames from
  c10::alloc_cpu out to the interpreter, then Python frames by (co_name, file,
  line) out to the script's <module>. memray's Python stacks go on into runpy and
  memray's `run` (cut there), and in a fork child they begin at the frame that
  forked, multiprocessing's Popen._launch: memtool's worker stacks go on through
  the parent's frames, so both are cut at _launch, and each of memray's must end
  there. A function of libtorch_cpu with two names (linker-folded identical
  code) is named by one of them on both sides (peer_figures.symbol_aliases).
- torch.profiler: per op, key_averages' self_cpu_memory_usage and
  cpu_memory_usage are signed sums (frees count against the op they happen in);
  memtool has no stack for a free, so its allocations per op are compared with
  the profiler's allocation records per op, attributed as the profiler does
  (peer_figures.profiler_figures), after checking that this attribution gives
  key_averages' own figures for every op; where an op saw no free, its
  key_averages figure itself must be memtool's. memtool's ops are the profiler's
  scopes on its stacks (peer_figures.profiler_scopes). The profiler was on from
  before the process's first storage, so its records' running peak is the
  process's peak too.
- The profiler's figures of the memtool and memray runs must be the bare run's:
  neither tool changes what the program allocates.

Skips (77), saying why, where the test Python (MEMTOOL_TEST_PYTHON, by default
build/venv/bin/python of the checkout) or its torch, torchvision or memray is
missing. ctest starts it with /usr/bin/python3, which checks that and runs it
again under the test Python."""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
# Figures of this program with torch 2.14.1 and torchvision 0.29.1 (the venv's),
# which every tool must give; a test that only compared the tools could pass with
# both wrong the same way, or with nothing counted.
RESNET_PROCESS = {"alloc_bytes": 684_231_428, "alloc_count": 2018, "peak_bytes": 136_867_632}
# loader_workers.py: item i is torch.rand(1000 + 100 * i), 4 bytes a float: items
# 0, 1, 4 and 5 in worker 0, 2, 3, 6 and 7 in worker 1.
WORKER_ITEM_BYTES = [sum(4 * (1000 + 100 * i) for i in items) for items in ((0, 1, 4, 5), (2, 3, 6, 7))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--memtool", required=True, help="the memtool binary")
    parser.add_argument("--python", required=True, help="the Python with torch, torchvision and memray")
    parser.add_argument("--work", required=True, help="a directory for the runs' files (emptied first)")
    parser.add_argument("--in-test-python", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.in_test_python:
        why = missing(args.python)
        if why:
            print(f"skipped: {why}")
            return SKIP
        os.execv(args.python, [args.python, os.path.abspath(__file__), *sys.argv[1:], "--in-test-python"])
    sys.stdout.reconfigure(line_buffering=True)  # ctest -V shows each figure as it comes
    args.memtool, args.work = os.path.abspath(args.memtool), os.path.abspath(args.work)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    checks = Checks()
    resnet(args, checks)
    loader(args, checks)
    print(f"{checks.passed} checks passed, {len(checks.failed)} failed")
    for failure in checks.failed:
        print("FAILED:", failure)
    return 1 if checks.failed else 0


def missing(python):
    if not os.access(python, os.X_OK):
        return f"no test Python at {python} (MEMTOOL_TEST_PYTHON; scripts/venv.sh makes build/venv)"
    probe = subprocess.run([python, "-c", "import memray, torch, torchvision"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{python} lacks memray, torch or torchvision: {probe.stderr.strip().splitlines()[-1:]}"
    return None


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def equal(self, what, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed.append(f"{what}: {got!r} != {want!r}")

    def true(self, what, ok):
        self.equal(what, bool(ok), True)


def run(cmd, work, log):
    """Runs one tool over the program, its output kept in work/log."""
    with open(os.path.join(work, log), "w") as out:
        done = subprocess.run(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        with open(os.path.join(work, log)) as out:
            sys.stdout.write(out.read()[-4000:])
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}")


def memtool_run(args, script, trace, *program_args):
    run([args.memtool, "run", "-o", trace, "--", sys.executable, script, *program_args], args.work,
        os.path.basename(trace) + ".log")
    with open(os.path.join(args.work, trace)) as f:
        return json.load(f)["processes"]


def memray_run(args, script, capture, *program_args, fork=False):
    run([sys.executable, "-m", "memray", "run", "--native", *(["--follow-fork"] if fork else []), "-f", "-o",
         capture, script, *program_args], args.work, os.path.basename(capture) + ".log")


def native_modules(processes):
    return {f["module"] for p in processes for f in p["frames"] if f["kind"] == "native" and f["module"]}


def compare_process(checks, what, memtool, memray):
    """Totals, counts, peak and every stack of one process."""
    print(f"{what}: memtool {summary(memtool)}; memray {summary(memray)}")
    for figure in ("alloc_bytes", "alloc_count", "peak_bytes", "live_at_end"):
        checks.equal(f"{what} {figure} (memtool, memray)", memtool[figure], memray[figure])
    checks.true(f"{what}: storages counted", memtool["alloc_count"] > 0 and memtool["stacks"])
    only_memtool = set(memtool["stacks"]) - set(memray["stacks"])
    only_memray = set(memray["stacks"]) - set(memtool["stacks"])
    checks.equal(f"{what}: stacks only memtool has", [memtool["stacks"][k] + [k] for k in only_memtool], [])
    checks.equal(f"{what}: stacks only memray has", [memray["stacks"][k] + [k] for k in only_memray], [])
    differ = [(k, memtool["stacks"][k], memray["stacks"][k]) for k in memtool["stacks"]
              if k in memray["stacks"] and memtool["stacks"][k] != memray["stacks"][k]]
    checks.equal(f"{what}: stacks whose bytes or counts differ", differ, [])
    print(f"  {len(memtool['stacks'])} stacks, {len(set(memtool['stacks']) & set(memray['stacks']))} the same")


def summary(figures):
    return (f"{figures['alloc_bytes']} bytes in {figures['alloc_count']} allocations, peak {figures['peak_bytes']},"
            f" {figures['live_at_end']} live at the end")


def resnet(args, checks):
    import peer_figures as pf

    script = os.path.join(HERE, "resnet_train.py")
    run([sys.executable, script, "profiler_bare.json"], args.work, "profiler_bare.log")
    processes = memtool_run(args, script, "resnet.trace.json", "profiler_memtool.json")
    memray_run(args, script, "resnet.memray", "profiler_memray.json")
    profiled = {}
    for run_name in ("bare", "memtool", "memray"):
        with open(os.path.join(args.work, f"profiler_{run_name}.json")) as f:
            profiled[run_name] = json.load(f)
    checks.equal("the profiler's figures, under memtool and bare", profiled["memtool"], profiled["bare"])
    checks.equal("the profiler's figures, under memray and bare", profiled["memray"], profiled["bare"])
    profiler = profiled["bare"]

    aliases = pf.symbol_aliases(native_modules(processes))
    outermost = {("<module>", script)}
    checks.equal("resnet: processes", len(processes), 1)
    memtool = pf.memtool_figures(processes[0], outermost, aliases)
    memray = pf.memray_figures(os.path.join(args.work, "resnet.memray"), outermost, aliases)
    compare_process(checks, "resnet18", memtool, memray)
    for figure, want in RESNET_PROCESS.items():
        checks.equal(f"resnet18 {figure}, known", memtool[figure], want)

    print(f"resnet18 under torch.profiler: peak {profiler['peak_bytes']}, {profiler['live_at_end']} live at its end")
    checks.equal("resnet18 peak (torch.profiler, memtool)", profiler["peak_bytes"], memtool["peak_bytes"])
    compare_ops(checks, profiler, pf.memtool_per_op(processes[0], script, "train", "SGD", pf.aten_op_names()))


def compare_ops(checks, profiler, memtool):
    import peer_figures as pf

    averages = profiler["key_averages"]
    for kind, field in (("self", "self_cpu_memory_usage"), ("total", "cpu_memory_usage")):
        rows = profiler[kind]
        signed = {op: r["alloc_bytes"] - r["free_bytes"] for op, r in rows.items()
                  if r["alloc_bytes"] != r["free_bytes"]}
        checks.equal(f"the profiler's records, {kind} per op, against key_averages' {field}", signed,
                     {op: a[field] for op, a in averages.items() if a[field]})
        allocations = {op: {"alloc_bytes": r["alloc_bytes"], "alloc_count": r["alloc_count"]}
                       for op, r in pf.merge_evaluate_function(rows).items() if r["alloc_count"]}
        checks.equal(f"allocations per op, {kind} (memtool, torch.profiler)", memtool[kind], allocations)
        unfreed = {op for op, r in rows.items() if r["alloc_count"] and not r["free_count"]
                   and not op.startswith("autograd::engine::evaluate_function: ")}
        checks.equal(f"{field} of the ops that freed nothing (memtool, key_averages)",
                     {op: memtool[kind].get(op, {}).get("alloc_bytes") for op in unfreed},
                     {op: averages.get(op, {}).get(field) for op in unfreed})
        checks.true(f"ops with allocations, {kind}", len(allocations) > 1)
        print(f"  per op, {kind}: {len(allocations)} ops allocated, {len(unfreed)} of them freed nothing")
    under = sum(r["alloc_bytes"] for r in profiler["self"].values())
    by_op = ", ".join(f"{op} {r['alloc_bytes']}/{r['alloc_count']}"
                      for op, r in sorted(profiler["self"].items()) if r["alloc_count"])
    print(f"  {under} bytes allocated under the profiler; by op (self, bytes/allocations): {by_op}")


def loader(args, checks):
    import multiprocessing.popen_fork

    import peer_figures as pf

    script = os.path.join(HERE, "loader_workers.py")
    processes = memtool_run(args, script, "loader.trace.json")
    memray_run(args, script, "loader.memray", fork=True)
    # memray names a child's file after the parent's, with its pid.
    children = glob.glob(os.path.join(args.work, "loader.memray.*"))
    children = sorted((f for f in children if f.rsplit(".", 1)[1].isdigit()), key=lambda f: int(f.rsplit(".", 1)[1]))
    workers = sorted((p for p in processes[1:] if p.get("forked")), key=lambda p: p["pid"])
    checks.equal("loader: worker processes (memtool, memray)", (len(workers), len(children)), (2, 2))
    aliases = pf.symbol_aliases(native_modules(processes))
    main_outermost = {("<module>", script)}
    compare_process(checks, "loader main", pf.memtool_figures(processes[0], main_outermost, aliases),
                    pf.memray_figures(os.path.join(args.work, "loader.memray"), main_outermost, aliases))
    fork_frame = {("_launch", multiprocessing.popen_fork.__file__)}
    for n, (process, capture) in enumerate(zip(workers, children)):
        memtool = pf.memtool_figures(process, fork_frame, aliases)
        compare_process(checks, f"loader worker {n}", memtool, pf.memray_figures(capture, fork_frame, aliases, True))
        items = sum(nbytes for key, (nbytes, _) in memtool["stacks"].items()
                    if ("native", "torch::autograd::THPVariable_rand(_object*, _object*, _object*)") in key)
        checks.equal(f"loader worker {n}: torch.rand's bytes, known", items, WORKER_ITEM_BYTES[n])


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
