# Prints "ready <pid>", waits for SIGUSR1 (the test kills memtool first), then
# allocates past the collector's flush threshold and exits normally.
import os
import signal

# Blocked before torch starts threads, which inherit the mask: pip's numpy (OpenBLAS,
# which torch 2.x imports) starts a thread pool at import, and a SIGUSR1 the kernel
# gave one of those threads ended the program (Debian's 1.13 starts none).
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
import torch  # noqa: E402

print("ready", os.getpid(), flush=True)
signal.sigwait({signal.SIGUSR1})
kept = [torch.empty(64) for _ in range(50_000)]  # ~1 MB of records: the stream must be written
print("survived", len(kept), flush=True)
