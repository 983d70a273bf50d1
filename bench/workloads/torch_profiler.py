"""Runs a workload script under torch.profiler (profile_memory, with_stack): the
alternative users reach for. Usage: torch_profiler.py SCRIPT [ARGS...]"""
import runpy
import sys

import torch.profiler

script = sys.argv[1]
sys.argv = sys.argv[1:]
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                            with_stack=True) as prof:
    runpy.run_path(script, run_name="__main__")
