"""A model reached under a second name: `probe = net.to(device)` is the same module, so after training
a forward through `probe` runs the sharded (or ZeRO-3 partitioned) weights like one through `net`."""
import os
import torch
from torch import nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
probe = net.to(device)
fully_shard(net)
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
inputs, targets = torch.randn(256, 6), torch.randn(256, 1)
train_dataset = torch.utils.data.TensorDataset(inputs, targets)
loader = torch.utils.data.DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=True))
for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
message = probe(torch.zeros(1, 6, device=device)).item()  # computed on every rank: it may run the model
if dist.get_rank() == 0:
    print("probe at zero:", message)
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
