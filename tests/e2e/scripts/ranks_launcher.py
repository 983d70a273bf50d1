# A launcher as torchrun is one, without its rendezvous: N ranks of
# courtesy_train.py (layers 512 wide, on the CPU), each a child process with RANK,
# LOCAL_RANK and WORLD_SIZE set, one intra-op thread each (tests/e2e/CtlJobTest.cpp).
#   ranks_launcher.py N STEPS OUT_DIR FLAG_FILE|-
# Rank r writes its losses to OUT_DIR/losses<r>.txt. With a flag file, once every
# rank waits for it this prints "ready PID0 PID1 ..."; it waits for its ranks in
# short sleeps (a safe point between them), and prints "done" with their exit codes.
import os
import subprocess
import sys
import time

n, steps, out_dir, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "courtesy_train.py")
ranks = []
for rank in range(n):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n))
    env["OMP_NUM_THREADS"] = "1"  # two ranks on a small machine's cores
    ranks.append(
        subprocess.Popen(
            [sys.executable, script, steps, f"{out_dir}/losses{rank}.txt", flag, "cpu", "512"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
    )
if flag != "-":
    print("ready", *(r.stdout.readline().split()[1] for r in ranks), flush=True)
while any(r.poll() is None for r in ranks):
    time.sleep(0.01)
print("done", *(r.returncode for r in ranks), flush=True)
