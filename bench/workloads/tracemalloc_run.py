"""Runs a workload script under tracemalloc the way its documentation shows:
tracemalloc.start() (one frame an allocation, as `python -X tracemalloc` does), then at the end
a snapshot and its ten largest lines. It sees what Python's allocator hands out
(objects, frames, lists), not the memory c10 allocates for tensors' storages.
Usage: tracemalloc_run.py SCRIPT [ARGS...]"""
import runpy
import sys
import tracemalloc

script = sys.argv[1]
sys.argv = sys.argv[1:]
tracemalloc.start()
try:
    runpy.run_path(script, run_name="__main__")
finally:
    top = tracemalloc.take_snapshot().statistics("lineno")[:10]
    for stat in top:
        print(stat)
