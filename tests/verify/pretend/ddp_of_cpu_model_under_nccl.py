"""DDP of a model left on the CPU under an NCCL group (one rank, an in-memory store)."""
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
try:
    model = DistributedDataParallel(nn.Linear(4, 2))
finally:
    dist.destroy_process_group()
