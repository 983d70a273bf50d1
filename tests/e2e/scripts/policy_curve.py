# A program for a memory policy that reads a scripted device (tests/fakes/
# FakeNvml.cpp) or is given its policy from outside (PolicyTest.cpp): an 8 MiB
# region "kv" of known content, backed on disk, then
#   policy_curve.py rounds N      starts the fake NVML's curve (FAKE_NVML_START) and
#                                 waits, in pure Python (its safe points), until it
#                                 has been read N rounds
#   policy_curve.py stdin         prints "ready PID" and waits for a line on stdin
#   policy_curve.py api           sets its own policies through memtool.set_policy
#                                 and prints what came back, one line each
# then prints whether kv is intact and resident.
import json
import os
import sys

import memtool
import torch

KV = 8 << 20
with memtool.region("kv", backup="disk"):
    kv = torch.arange(KV // 8, dtype=torch.int64)


def kv_state():
    return [r.state for r in memtool.regions() if r.tag == "kv"]


mode = sys.argv[1]
if mode == "rounds":
    wanted = int(sys.argv[2])
    path = os.environ.get("FAKE_NVML_ROUNDS", "")
    if os.environ.get("FAKE_NVML_START"):
        open(os.environ["FAKE_NVML_START"], "w").close()  # the curve starts now
    seen = 0
    while seen < wanted:
        try:
            with open(path) as f:
                seen = int(f.read() or 0)
        except (OSError, ValueError):
            pass
elif mode == "stdin":
    print(f"ready {os.getpid()}", flush=True)
    sys.stdin.readline()
elif mode == "api":
    print("lines", json.dumps(memtool.set_policy({(0, 50): {"metric": "max", "threshold": {"percent": 50.0}},
                                                  (50, 101): {"metric": "freed", "threshold": {"bytes": 1 << 30}}})))
    print("shown", json.dumps(memtool.policy()["rules"][0]))
    for bad in ({"rules": [{"device": "cpu", "above": "1GiB", "do": "pause nothere"}]},
                {"rules": [{"device": "cpu", "above": "lots", "do": "gc"}]}):
        try:
            memtool.set_policy(bad)
        except ValueError as e:
            print("refused", e)
    print("kept", len(memtool.policy()["rules"]))
    memtool.set_policy(None)
    print("off", memtool.policy())
n = KV // 8
print(f"kv {kv_state()} {int(kv.sum()) == n * (n - 1) // 2}", flush=True)
