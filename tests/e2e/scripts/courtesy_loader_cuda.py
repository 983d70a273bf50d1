# torchvision's resnet18 on CUDA fed by a DataLoader with two worker processes and
# pinned memory (a pin-memory thread copies batches while the main thread
# trains), as a user runs it (RunCudaTest.cpp's TorchCudaCourtesy). Seeded and
# deterministic: one loss a step goes to LOSS_FILE. With a FLAG_FILE, after step 3
# it prints "ready PID" and runs pure Python until the flag exists: memtool ctl
# yields and restores it meanwhile, and the losses must not change.
#   courtesy_loader_cuda.py LOSS_FILE FLAG_FILE|-
import os
import sys

import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

loss_file, flag = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
data = TensorDataset(torch.randn(640, 3, 64, 64), torch.randint(0, 10, (640,)))
loader = DataLoader(data, batch_size=32, num_workers=2, pin_memory=True, shuffle=False)
model = torchvision.models.resnet18(num_classes=10).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with open(loss_file, "w") as out:
    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out.write(f"{step} {loss.item():.6f}\n")
        out.flush()
        if step == 3 and flag != "-":
            print("ready", os.getpid(), flush=True)
            while not os.path.exists(flag):
                pass
