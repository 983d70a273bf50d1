# A 1 GiB CUDA tensor in a pausable region, paused and resumed twice, under memtool
# run on a GPU (RunCudaTest.cpp's TorchCudaRegions, scripts/gpu-check.sh). Prints
# one JSON line: for the second round (and under "first", the first), what the
# device's free memory did, whether the tensor kept its address and content, and the
# copy times, beside a plain pinned copy of the same size.
#   regions_cuda.py MODE BACKUP     MODE preload|torch, BACKUP host|disk|none
import json
import sys
import time

import memtool
import torch

mode, backup = sys.argv[1], sys.argv[2]
memtool.set_hook_mode(mode)
GiB = 1 << 30
torch.cuda.init()
torch.manual_seed(0)
with memtool.region("weights", backup=backup, device="cuda"):
    w = torch.empty(GiB // 4, dtype=torch.float32, device="cuda")
    w.normal_()
reference = w.cpu()
torch.cuda.synchronize()
ptr = w.data_ptr()


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def cycle():
    """One pause and resume: what the device's free memory did, and the times."""
    free0 = torch.cuda.mem_get_info()[0]
    paused, pause_s = timed(lambda: memtool.pause("weights"))
    free1 = torch.cuda.mem_get_info()[0]
    resumed, resume_s = timed(lambda: memtool.resume("weights"))
    free2 = torch.cuda.mem_get_info()[0]
    return {
        "pause_ok": paused.ok, "pause_bytes": paused.bytes, "resume_ok": resumed.ok,
        "resume_bytes": resumed.bytes, "freed_by_pause": free1 - free0, "taken_by_resume": free1 - free2,
        "same_address": w.data_ptr() == ptr,
        "same_content": bool(torch.equal(w.cpu(), reference)) if backup != "none" else None,
        "pause_s": pause_s, "resume_s": resume_s, "messages": [paused.message, resumed.message],
    }


# The first pause pins its host backup (or staging buffers) and makes the copy
# stream, which the driver pays for in device memory too; the second reuses both.
first = cycle()
second = cycle()

# The bare operations a host backup is measured against: a copy each way to
# memory pinned beforehand (later pauses reuse theirs), and, for a first pause,
# which must pin its buffer, pinning a buffer and copying to it.
def pin_and_copy():
    fresh = torch.empty(GiB // 4, dtype=torch.float32, pin_memory=True)
    fresh.copy_(w, non_blocking=True)
    torch.cuda.synchronize()
    return fresh


fresh, pin_d2h_s = timed(pin_and_copy)
pinned = torch.empty(GiB // 4, dtype=torch.float32, pin_memory=True)
torch.cuda.synchronize()
_, d2h_s = timed(lambda: (pinned.copy_(w, non_blocking=True), torch.cuda.synchronize()))
_, h2d_s = timed(lambda: (w.copy_(pinned, non_blocking=True), torch.cuda.synchronize()))
print(json.dumps({"mode": mode, "backup": backup, **second, "first": first,
                  "pinned_d2h_s": d2h_s, "pinned_h2d_s": h2d_s, "pin_and_d2h_s": pin_d2h_s}))
