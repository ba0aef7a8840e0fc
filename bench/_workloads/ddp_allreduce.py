"""A tiny 2-rank DDP job: gloo all_reduce of one tensor (run by torchrun or our launcher)."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t[0].item() == sum(range(1, dist.get_world_size() + 1))
dist.destroy_process_group()
