# A fork child's regions are its own: it does not see, pause or count its
# parent's (its copy of them is freed the usual way), and the regions it enters
# serve its memory, paused and resumed on its own stream.
import os

import memtool
import torch

# One intra-op thread, as Debian's torch 1.13 runs here: pip's torch 2.x parallelizes
# the 1 MiB fill with GNU OpenMP (libgomp), which is not fork-safe, and the child's
# first parallel op would wait forever for the parent's thread team.
torch.set_num_threads(1)
MiB = 1 << 20
with memtool.region("kv", backup="disk"):
    a = torch.full((MiB,), 3, dtype=torch.uint8)
pid = os.fork()
if pid == 0:
    print("child sees", [(r.tag, r.bytes) for r in memtool.regions()], flush=True)
    with memtool.region("wkv", backup="disk"):
        w = torch.full((2 * MiB,), 5, dtype=torch.uint8)
    r = memtool.pause()
    print("child paused", r.bytes, [(g.tag, g.state) for g in memtool.regions()], flush=True)
    print("child reads its copy of the parent's", int(a.sum()) == 3 * MiB, flush=True)
    r = memtool.resume()
    print("child resumed", r.bytes, int(w.sum()) == 5 * 2 * MiB, flush=True)
    del a
    os._exit(0)
os.waitpid(pid, 0)
r = memtool.pause("kv")
print("parent paused", r.bytes, [(g.tag, g.state) for g in memtool.regions()], flush=True)
memtool.resume("kv")
print("parent kept", int(a.sum()) == 3 * MiB)
