"""Runs a workload script inside memtool.track(TRACE): what the block costs when a
program profiles itself (the collector loaded by dlopen, not LD_PRELOAD).
Usage: track_run.py TRACE SCRIPT [ARGS...] (MEMTOOL_BIN names the memtool program,
PYTHONPATH holds memtool's python/ directory)."""
import runpy
import sys

import torch  # noqa: F401  (track patches what torch loaded: import it first, as users do)

import memtool

trace, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
with memtool.track(trace, quiet=True):
    runpy.run_path(script, run_name="__main__")
