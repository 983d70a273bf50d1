# Two CUDA graphs, each captured into a pool of its own, then a third and a
# fourth that share one from torch.cuda.graph_pool_handle() (RunCudaTest.cpp:
# TorchCudaGraphPools). Each capture allocates one 4 MiB output; the trace's
# graph pools must carry the ids graph.pool() gives.
import json

import torch

x = torch.ones(1 << 20, device="cuda")  # 4 MiB of float32
torch.cuda.synchronize()
own = []
for k in range(2):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * (k + 2)
    own.append((g, y))
handle = torch.cuda.graph_pool_handle()
shared = []
for k in range(2):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=handle):
        y = x + k
    shared.append((g, y))
for g, _ in own + shared:
    g.replay()
torch.cuda.synchronize()
right = all(bool((y == x * (k + 2)).all()) for k, (_, y) in enumerate(own)) and all(
    bool((y == x + k).all()) for k, (_, y) in enumerate(shared))
print("graph_pools_cuda " + json.dumps({
    "own": [list(g.pool()) for g, _ in own],
    "shared": list(shared[0][0].pool()),
    "right": right,
}))
