"""The modes a bench script compares: the bare program, and `memtool run` from each
build directory given (the one under test first, then earlier builds by their path)."""
import os
import subprocess
import sys
import tempfile


def memtool_modes(script, build, others, memtool_args=()):
    """{"bare": [], "memtool": [memtool, "run", "-q", ...], "memtool (DIR)": ...}: each a
    command prefix; exits with a one-line error naming `script` when a build has no memtool."""
    modes = {"bare": []}
    for label, directory in [("memtool", build)] + [(f"memtool ({d})", d) for d in others]:
        exe = os.path.join(directory, "bin", "memtool")
        if not os.access(exe, os.X_OK):
            sys.exit(f"{script}: no {exe}; build first (scripts/setup.sh) or pass --build")
        modes[label] = [exe, "run", "-q", *memtool_args]
    return modes


def alternate(script, modes, worker, rounds, prefix, check=None):
    """Runs the command `worker` under every mode in turn, `rounds` times (so that machine
    noise hits every mode alike); {mode: [its stdout of each round]}. A failed run ends the
    script; `check(trace_path, mode)` looks at each memtool run's trace."""
    outputs = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        trace = os.path.join(tmp, "t.json")
        for _ in range(rounds):
            for mode, command in modes.items():
                cmd = command + (["-o", trace, "--"] if command else []) + worker
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"{script}: {mode} failed ({out.returncode}): {out.stderr.strip()}")
                outputs[mode].append(out.stdout)
                if command and check:
                    check(trace, mode)
    return outputs
