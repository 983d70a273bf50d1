# A seeded MLP training run that prints nothing but its losses (to a file) and, at
# a known step, waits in pure Python for a flag file: a safe point memtool ctl's
# yield can park it at, with nothing allocated meanwhile (CourtesyTest.cpp,
# RunCudaTest.cpp; as a rank of ranks_launcher.py, CtlJobTest.cpp).
#   courtesy_train.py STEPS LOSS_FILE FLAG_FILE|- [cpu|cuda] [WIDTH]
# WIDTH: of each of the six layers (default 2048). Seeded by RANK where a launcher
# set one (else 0), so each rank of a job trains on its own numbers.
# At the wait it prints "ready PID PARAM_BYTES", and on CUDA also the bytes the
# device holds that PyTorch's allocator does not (the CUDA context, libraries'
# own): what a yield cannot take.
import os
import sys

import torch

steps, loss_file, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
torch.manual_seed(int(os.environ.get("RANK", "0")))
D = int(sys.argv[5]) if len(sys.argv) > 5 else 2048
layers = []
for _ in range(6):
    layers += [torch.nn.Linear(D, D), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers[:-1]).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x, y = torch.randn(64, D).to(device), torch.randn(64, D).to(device)
params = sum(p.numel() * p.element_size() for p in model.parameters())
with open(loss_file, "w") as out:
    for step in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.write(f"{step} {loss.item()!r}\n")
        if step == 2 and flag != "-":
            line = f"ready {os.getpid()} {params}"
            if device == "cuda":
                torch.cuda.synchronize()
                free, total = torch.cuda.mem_get_info()
                line += f" {total - free - torch.cuda.memory_reserved()}"
            print(line, flush=True)
            while not os.path.exists(flag):
                pass
print("done", flush=True)
