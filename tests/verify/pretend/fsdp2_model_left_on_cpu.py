"""FSDP2 on a model left on the CPU with CPU batches: the default mesh is a CUDA mesh, so
fully_shard moves the parameters to the GPU and the root moves the inputs; the CPU labels
then meet the GPU output in the loss. With `gpu` as argument, the labels go to the GPU too."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x = torch.randn(16, 8)
    y = (x[:, 0] > 0).long()
    if sys.argv[1:] == ["gpu"]:
        y = y.cuda()
    output = model(x)
    loss = nn.functional.cross_entropy(output, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
os.write(1, f"rank {dist.get_rank()} output on {output.device} loss {loss.item():.4f}\n".encode())  # one write: shared pipe
dist.destroy_process_group()
