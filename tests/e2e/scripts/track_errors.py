# What memtool.track refuses, each said clearly, and the program goes on.
import sys

if sys.argv[1] == "no-torch":
    sys.modules["torch"] = None  # import torch fails as where it is not installed
    import memtool
    try:
        memtool.track(sys.argv[2]).start()
    except RuntimeError as e:
        print("refused:", e)
    print("went on")
    sys.exit(0)

import torch

import memtool

if sys.argv[1] == "nested":
    with memtool.track(sys.argv[2]) as t:
        try:
            memtool.track(sys.argv[2] + ".inner").start()
        except RuntimeError as e:
            print("refused:", e)
        x = torch.empty(1000, dtype=torch.uint8)
elif sys.argv[1] == "under-run":
    try:
        memtool.track(sys.argv[2]).start()
    except RuntimeError as e:
        print("refused:", e)
elif sys.argv[1] == "raises":
    try:
        with memtool.track(sys.argv[2]):
            x = torch.empty(4000, dtype=torch.uint8)  # line 33
            raise KeyError("the block's own error")
    except KeyError as e:
        print("raised:", e)
    print("enabled", memtool.enabled)
print("went on")
