# Sparse tensors for memtool.report_tensors: a COO tensor of 65,536 entries
# (int64 indices, 2 x 65,536: 1,048,576 B; float32 values: 262,144 B) and a CSR one
# of 1,024 rows and 4,096 entries (crow 1,025 x int64: 8,200 B; col 4,096 x int64:
# 32,768 B; values 4,096 x float32: 16,384 B). Their parts are the only storages.
import torch

import memtool

n = 65536
coo = torch.sparse_coo_tensor(torch.stack([torch.arange(n) % 1024, torch.arange(n) // 64]),
                              torch.ones(n), (1024, 1024))
csr = torch.sparse_csr_tensor(torch.arange(0, 4097, 4), torch.arange(4096) % 1024, torch.ones(4096),
                              (1024, 1024))
report = memtool.report_tensors(device="cpu", file=open("/dev/null", "w"))
cpu = report["devices"][0]
for t in cpu["tensors"]:
    print(t["name"], t["bytes"])
print("visible", cpu["visible_bytes"], "not visible", cpu["invisible_bytes"])
