# A launcher as torchrun is one, without its rendezvous: two ranks of hold_rank.py,
# each a child with RANK, LOCAL_RANK and WORLD_SIZE set, holding 4,000,000 and
# 7,000,000 B at once (ProcessesTest.cpp). This process imports no torch.
import os
import subprocess
import sys
import time

rank_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold_rank.py")
sizes = [4_000_000, 7_000_000]
ranks = []
for rank, size in enumerate(sizes):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(len(sizes)))
    ranks.append(
        subprocess.Popen(
            [sys.executable, rank_script, str(size)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    )
for r in ranks:
    assert r.stdout.readline() == "held\n"
# Both hold theirs now. A free's time stands up to one tick of the coarse clock
# before it happened (core/PROTOCOL.md): past two ticks of that clock, read from
# the clock itself, each free stands after the other rank's allocation.
# Python names no CLOCK_MONOTONIC_COARSE; Linux numbers it 6.
coarse = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)
tick = time.clock_getres(coarse)
held_at = time.clock_gettime(coarse)
while time.clock_gettime(coarse) < held_at + 2 * tick:
    pass
for r in ranks:
    r.stdin.write("free\n")
    r.stdin.flush()
print("done", *(r.wait() for r in ranks), flush=True)
