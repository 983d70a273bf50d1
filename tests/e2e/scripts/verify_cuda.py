# Verified restores on a GPU (RunCudaTest.cpp's TorchCudaVerify, scripts/gpu-check.sh):
# a 1 GiB CUDA tensor in a verified region and one in a plain region, each paused
# to host memory and resumed three times (the checksum kernel runs on the device
# at each pause and resume of the verified one); then a 4 MiB verified region
# paused to disk, its backup spoiled by one byte, resumed. Prints one JSON line:
# the median pause+resume seconds of each, verifying's cost, whether the content
# came back, and what the spoiled resume raised.
#   verify_cuda.py BACKUP_PARENT_DIR
import json
import statistics
import sys
import time

import memtool
import torch
from spoil_backup import spoil

parent = sys.argv[1]
GiB = 1 << 30
torch.cuda.init()
torch.manual_seed(0)
with memtool.region("verified", backup="host", device="cuda", verify=True):
    v = torch.empty(GiB // 4, dtype=torch.float32, device="cuda").normal_()
with memtool.region("plain", backup="host", device="cuda"):
    p = torch.empty(GiB // 4, dtype=torch.float32, device="cuda").normal_()
reference = v.cpu()
torch.cuda.synchronize()


def cycle(tag):
    start = time.perf_counter()
    assert memtool.pause(tag).ok
    assert memtool.resume(tag).ok  # VerifyError if the verified one came back different
    return time.perf_counter() - start


times = {"verified": [], "plain": []}
for _ in range(3):
    for tag in times:
        times[tag].append(cycle(tag))
same = bool(torch.equal(v.cpu(), reference))

with memtool.region("spoiled", backup="disk", device="cuda", verify=True):
    s = torch.ones(1 << 20, dtype=torch.float32, device="cuda")
torch.cuda.synchronize()
memtool.pause("spoiled")
spoil(parent, 0)
caught = ""
try:
    memtool.resume("spoiled")
except memtool.VerifyError as e:
    caught = str(e)
verified, plain = statistics.median(times["verified"]), statistics.median(times["plain"])
print(json.dumps({"verified_s": verified, "plain_s": plain, "cost": verified / plain - 1, "same": same,
                  "caught": caught, "spoiled_data_ptr": s.data_ptr(),
                  "ones_after": int((s.cpu() == 1).sum())}))
