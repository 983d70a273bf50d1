# One rank of a torchrun job (gloo, CPU): rank r fills (r + 1) * 250,000 float32s.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


t = torch.full((250_000 * (rank + 1),), float(rank + 1))
dist.all_reduce(t[:250_000])
print("rank", rank, "of", dist.get_world_size(), float(t[0]), flush=True)
dist.destroy_process_group()
