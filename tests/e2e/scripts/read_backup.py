"""memtool.read_backup: a paused tensor's content from its disk backup, into a
new CPU tensor, while the region stays paused; and the cases with nothing to read."""
import torch

import memtool
from memtool.torch_memory_saver import torch_memory_saver

with memtool.region("weights", backup="disk"):
    w = torch.arange(3_000_000, dtype=torch.float32)
with memtool.region("scratch", backup="none"):
    s = torch.ones(100_000)
plain = torch.zeros(10)
view = w[1_123_456:2_123_556]  # inside the allocation, not at its start
expected = torch.arange(3_000_000, dtype=torch.float32)

try:
    memtool.read_backup(w)
except ValueError as e:
    print("resident:", e)
memtool.pause()
copy = memtool.read_backup(w)
print("whole", copy.dtype, tuple(copy.shape), bool(copy.equal(expected)))
part = memtool.read_backup(view)
print("view", tuple(part.shape), bool(part.equal(expected[1_123_456:2_123_556])))
print("tms", bool(torch_memory_saver.get_cpu_backup(view).equal(expected[1_123_456:2_123_556])),
      torch_memory_saver.get_cpu_backup(s))
for tensor in (s, plain):
    try:
        memtool.read_backup(tensor)
    except ValueError as e:
        print("refused:", e)
print("still paused", [r.state for r in memtool.regions()])
memtool.resume()
print("after resume", bool(w.equal(expected)))
