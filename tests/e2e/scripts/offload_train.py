# A seeded MLP trained with every layer offloaded to disk between its uses
# (memtool.offload(prefetch=True, optimizer=...)), against the same loop bare
# (PolicyTest.cpp):
#   offload_train.py STEPS LOSS_FILE bare|offload
# Offloaded, it prints after the first step what memtool holds paused ("paused
# TAGS BYTES", every layer's weights, 1-D biases resident), whether every weight
# kept its data_ptr from the adopt on, and "adopt" for a module adopted and
# paused whole (a second model), then resumed: its output unchanged.
import sys

import torch

steps, loss_file, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.manual_seed(0)
D = 512
model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(D, D), torch.nn.Tanh())])
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(16, D), torch.randn(16, D)

if mode == "offload":
    import memtool

    handle = memtool.offload(model, to="disk", prefetch=True, optimizer=opt)
    pointers = [p.data_ptr() for p in model.parameters()]

with open(loss_file, "w") as out:
    for step in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.write(f"{step} {loss.item()!r}\n")
        if mode == "offload" and step == 0:
            paused = [r for r in memtool.regions() if r.state == "paused"]
            print(f"paused {len(paused)} {sum(r.paused_bytes for r in paused)}", flush=True)
if mode == "offload":
    print(f"pointers kept {pointers == [p.data_ptr() for p in model.parameters()]}")
    handle.remove()
    other = torch.nn.Linear(D, D)
    probe = torch.randn(2, D)
    before = other(probe)
    a = memtool.adopt(other, "whole")
    memtool.pause("whole")
    memtool.resume("whole")
    print(f"adopt {a.tensors} {a.storages} {a.bytes} {a.kept} {torch.equal(other(probe), before)}")
print("done", flush=True)
