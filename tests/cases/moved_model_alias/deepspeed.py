"""A model reached under a second name: `probe = net.to(device)` is the same module, so after training
a forward through `probe` runs the sharded (or ZeRO-3 partitioned) weights like one through `net`."""
import json
import os
import torch
from torch import nn
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
probe = net.to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)

# DeepSpeed reads its settings from ds_config.json
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
net, optimizer, _, _ = deepspeed.initialize(model=net, optimizer=optimizer, config=ds_config)
inputs, targets = torch.randn(256, 6), torch.randn(256, 1)
train_dataset = torch.utils.data.TensorDataset(inputs, targets)
loader = torch.utils.data.DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=True))
for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(net(x), y)
        net.backward(loss)
        net.step()
message = probe(torch.zeros(1, 6, device=device)).item()  # computed on every rank: it may run the model
if dist.get_rank() == 0:
    print("probe at zero:", message)
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
