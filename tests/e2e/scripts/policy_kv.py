# A seeded MLP training run beside a 64 MiB "kv" region of known content, for a
# memory policy to act on (PolicyTest.cpp):
#   policy_kv.py STEPS LOSS_FILE bare|policy
# Under a policy that pauses kv to disk above 200 MiB of the process's CPU memory
# and resumes it below 100 MiB: after 3 steps it takes a 160 MiB scratch buffer
# (the process goes over 200 MiB) and trains on, touching nothing of kv, until
# the policy has paused it; then drops the scratch and trains on until the
# policy has resumed it. It prints "paused RSS_DROP" and "resumed SAME" (whether
# kv's content came back as it was). Bare, the same steps without memtool.
import os
import sys

import torch

steps, loss_file, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
KV = 64 << 20
torch.manual_seed(0)
D = 256
model = torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, D))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
x, y = torch.randn(32, D), torch.randn(32, D)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")


def kv_state():
    for r in memtool.regions():
        if r.tag == "kv":
            return r.state
    return "none"


def train(out, step):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    out.write(f"{step} {loss.item()!r}\n")


if mode == "policy":
    import memtool

    with memtool.region("kv", backup="disk"):
        kv = torch.empty(KV, dtype=torch.uint8)
    # Filled and checked a MiB row at a time: nothing large besides kv itself.
    pattern = torch.arange(1 << 20).remainder(251).to(torch.uint8)
    kv.view(-1, 1 << 20).copy_(pattern.expand(KV >> 20, -1))


def kv_intact():
    return all(torch.equal(row, pattern) for row in kv.view(-1, 1 << 20))

with open(loss_file, "w") as out:
    step = 0
    for _ in range(3):
        train(out, step)
        step += 1
    if mode == "policy":
        before = rss()
        scratch = torch.ones(160 << 20, dtype=torch.uint8)
        # Training goes on while the policy decides: its clock, not this loop, acts.
        while kv_state() != "paused":
            train(out, step)
            step += 1
        print(f"paused {before + (160 << 20) - rss()}", flush=True)
        del scratch
        while kv_state() != "resident":
            train(out, step)
            step += 1
        print(f"resumed {kv_intact()}", flush=True)
    while step < steps:
        train(out, step)
        step += 1
print("done", flush=True)
