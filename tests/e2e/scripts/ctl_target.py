# A small program for memtool ctl under faults (CtlFaultsTest.cpp): a 16 MiB region
# "w" of int64 0, 1, 2, ... backed on disk, then "ready PID". On SIGUSR1 it wakes,
# runs Python for a while (the safe points a yield waits for), and prints whether
# w is intact.
#   ctl_target.py wait       as above
#   ctl_target.py takeover   pauses w itself, puts a file of its own over the backup's
#                            descriptor (dup2), resumes: what the resume says, and
#                            whether w is intact or still paused
import os
import signal
import sys

signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # before torch's threads
import memtool  # noqa: E402
import torch  # noqa: E402

N = 16 * (1 << 20) // 8
with memtool.region("w", backup="disk"):
    w = torch.arange(N, dtype=torch.int64)
ptr = w.data_ptr()


def intact():
    return w.data_ptr() == ptr and int(w.sum()) == N * (N - 1) // 2


def backup_descriptors():
    d = os.environ["MEMTOOL_BACKUP_DIR"] + "/"
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(d) and target.endswith(" (deleted)"):
            found.append(int(fd))
    return found


mode = sys.argv[1]
if mode == "wait":
    print("ready", os.getpid(), flush=True)
    signal.sigwait([signal.SIGUSR1])
    total = 0
    for i in range(200000):  # Python to run: a safe point at every step
        total += i
    print("intact", intact(), flush=True)
elif mode == "takeover":
    r = memtool.pause("w")
    fds = backup_descriptors()
    print("paused", r.ok, r.bytes, "descriptors", len(fds), "high", min(fds) >= 100, flush=True)
    junk = os.open(os.environ["MEMTOOL_BACKUP_DIR"] + "/junk", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(junk, b"\x55" * (N * 8))
    os.dup2(junk, fds[0])
    r = memtool.resume("w")
    print("resume", r.ok, r.bytes, flush=True)
    print("message", r.message, flush=True)
    print("state", [(g.tag, g.state) for g in memtool.regions()], flush=True)
