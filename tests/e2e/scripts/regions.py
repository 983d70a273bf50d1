# Pausable CPU regions through `import memtool`, under memtool run (RegionsTest.cpp).
#   regions.py api    pause/resume from the program itself
#   regions.py ctl    wait for `memtool ctl` to pause and resume from outside
#   regions.py touch  touch paused memory: the program must end with memtool's message
import os
import signal
import sys

# Blocked before torch starts threads, which inherit the mask: pip's numpy (OpenBLAS,
# which torch 2.x imports) starts a thread pool at import, and a SIGUSR1 the kernel
# gave one of those threads would end the program (Debian's 1.13 starts none).
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
import memtool  # noqa: E402
import torch  # noqa: E402

MiB = 1 << 20


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024


def backups():
    # A disk backup is a file no name points to (nothing is left behind however
    # the process ends): this process's descriptors show it, "DIR/#inode (deleted)".
    # Entries of the directory count too: the tests give each run an empty one.
    d = os.environ["MEMTOOL_BACKUP_DIR"] + "/"
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        held += target.startswith(d) and target.endswith(" (deleted)")
    return held + len(os.listdir(os.environ["MEMTOOL_BACKUP_DIR"]))


# 256 MiB of int64 0, 1, 2, ...: its sum, n(n-1)/2, checks every element.
N = 256 * MiB // 8
with memtool.region("weights", backup="disk"):
    w = torch.arange(N, dtype=torch.int64)
with memtool.region("kv", backup="none"):
    kv = torch.ones(64 * MiB // 4)
ptr = w.data_ptr()


def intact():
    return w.data_ptr() == ptr and int(w.sum()) == N * (N - 1) // 2


mode = sys.argv[1]
if mode == "api":
    # The call runs in this interpreter, which allocates for it (a result object,
    # now and then a fresh page of its heap): 64 KiB of slack for that. The same
    # pause driven by `memtool ctl` is measured from outside with none.
    memtool.pause("not-a-tag")
    before = rss()
    r = memtool.pause("weights")
    print("pause", r.ok, r.changed, r.bytes, r.allocations, before - rss() >= 256 * MiB - 64 * 1024, backups())
    print("kv still there", float(kv.sum()) == 64 * MiB // 4)
    r = memtool.pause("kv")
    print("pause kv", r.bytes)
    r = memtool.resume("weights")
    print("resume", r.ok, r.bytes, intact(), backups())
    print("again", memtool.resume("weights").message)
    r = memtool.resume("kv")
    print("resume kv", r.bytes, [(g.tag, g.state) for g in memtool.regions()])
elif mode == "ctl":
    print("ready", os.getpid(), flush=True)
    signal.sigwait([signal.SIGUSR1])
    print("intact", intact(), backups(), flush=True)
elif mode == "touch":
    memtool.pause("kv")
    print("touching", flush=True)
    print(float(kv.sum()))
