"""spoil(parent, offset): flips one byte of the one disk backup this process has
open under `parent`. No name points to a backup file; its /proc/self/fd link
is how to reach it (a bad disk or a stray writer, for the verify tests)."""
import os


def spoil(parent, offset):
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(parent + "/") and target.endswith(" (deleted)"):
            found.append(fd)
    assert len(found) == 1, found
    with open(f"/proc/self/fd/{found[0]}", "r+b", buffering=0) as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0xFF]))
        os.fsync(f.fileno())
