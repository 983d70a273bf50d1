"""memtool.region(..., verify=True): a backup spoiled while paused makes resume()
raise VerifyError naming the allocation; without verify the same spoiling comes
back unnoticed (memtool run --verify verifies every tag).

usage: verify_restore.py BACKUP_PARENT_DIR"""
import sys

import torch

import memtool
from spoil_backup import spoil

parent = sys.argv[1]
with memtool.region("checked", backup="disk", verify=True):
    w = torch.arange(1_000_000, dtype=torch.float32)
with memtool.region("unchecked", backup="disk"):
    u = torch.arange(1_000_000, dtype=torch.float32)
expected = torch.arange(1_000_000, dtype=torch.float32)

for tag, tensor in (("checked", w), ("unchecked", u)):
    memtool.pause(tag)
    spoil(parent, 4 * 123_456)  # float 123,456's lowest byte
    try:
        r = memtool.resume(tag)
        print(tag, "resumed", r.ok, "equal", bool(tensor.equal(expected)))
    except memtool.VerifyError as e:
        text = str(e)
        at = text.index(" (", text.index("0x"))
        print(tag, "VerifyError:", text[:text.index("0x")] + "ADDRESS" + text[at:text.index("checksum")]
              + "...", e.result.ok, "at data_ptr", int(text[text.index("0x"):at], 16) == tensor.data_ptr())
        print(tag, "changed", int((tensor != expected).sum()), "value", tensor[123_456].item() != 123_456.0)
