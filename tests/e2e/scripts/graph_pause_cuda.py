# CUDA graphs whose pools are a region's, paused and resumed (RunCudaTest.cpp:
# TorchCudaGraphPause): one captured inside memtool.region(graphs=True), one
# through the torch_memory_saver shim's cuda_graph(). While paused the device
# gets the pools' memory back; after the resume both graphs replay at the same
# addresses and give a bare replay's outputs.
import json

import torch

import memtool
from memtool.torch_memory_saver import torch_memory_saver

N = 16 << 20  # 64 MiB of float32 per graph's output
x = torch.arange(N, device="cuda", dtype=torch.float32)
torch.cuda.synchronize()

g1 = torch.cuda.CUDAGraph()
with memtool.region("graphs", backup="host", graphs=True):
    with torch.cuda.graph(g1):
        y1 = x * 2 + 1
g2 = torch.cuda.CUDAGraph()
with torch_memory_saver.cuda_graph(g2, tag="tms_graphs", enable_cpu_backup=True):
    y2 = x - 3
for g in (g1, g2):
    g.replay()
torch.cuda.synchronize()
want1, want2 = y1.clone(), y2.clone()
ptrs = (y1.data_ptr(), y2.data_ptr())

torch.cuda.synchronize()
free_before = torch.cuda.mem_get_info()[0]
p1 = memtool.pause("graphs")
torch_memory_saver.pause("tms_graphs")
free_paused = torch.cuda.mem_get_info()[0]
memtool.resume("graphs")
torch_memory_saver.resume("tms_graphs")
y1.zero_()
y2.zero_()
for g in (g1, g2):
    g.replay()
torch.cuda.synchronize()
print("graph_pause_cuda " + json.dumps({
    "paused_bytes": p1.bytes,
    "freed_by_pause": free_paused - free_before,
    "same_addresses": (y1.data_ptr(), y2.data_ptr()) == ptrs,
    "replay_equal": bool(torch.equal(y1, want1)) and bool(torch.equal(y2, want2)),
}))
