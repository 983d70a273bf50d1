# Known CUDA tensors for the torch bridge (tests/e2e/RunCudaTest.cpp): memtool's
# active and reserved figures must equal what PyTorch itself reports, printed here
# as one JSON line on stdout; NVML's view of this process comes with it.
import json
import os
import subprocess
import sys

import torch

MiB = 1 << 20


def activations():
    return torch.empty(24 * MiB, dtype=torch.uint8, device="cuda")  # line 15: large pool


def scratch():
    return torch.empty(1000, dtype=torch.float32, device="cuda")  # line 19: small pool


def main():
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 77
    kept = activations()
    tmp = scratch()
    grown = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")  # line 28
    del tmp, grown
    leak = torch.ones(3 * MiB, dtype=torch.uint8, device="cuda")  # line 30
    torch.cuda.synchronize()
    del kept, leak  # the figures below are the run's last: memtool's current is at exit
    stats = torch.cuda.memory_stats()
    figures = {
        # What tensors asked for: PyTorch's requested_bytes, which memtool's
        # active counts. max_memory_allocated() counts whole blocks (rounded up
        # to 512 bytes, or a segment's whole remainder), so it can be larger.
        "max_requested": stats["requested_bytes.all.peak"],
        "requested": stats["requested_bytes.all.current"],
        "max_allocated": torch.cuda.max_memory_allocated(),
        "max_reserved": torch.cuda.max_memory_reserved(),
        "allocated": torch.cuda.memory_allocated(),
        "reserved": torch.cuda.memory_reserved(),
        "nvml_used": None,
    }
    try:  # the driver's own per-process figure, where nvidia-smi is there to ask
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30).stdout
        for row in out.splitlines():
            pid, used = [x.strip() for x in row.split(",")]
            if int(pid) == os.getpid():
                figures["nvml_used"] = int(used) * MiB
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    print(json.dumps(figures))
    return 0


sys.exit(main())
