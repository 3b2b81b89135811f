"""Training that can be stopped with Ctrl+C: the optimizer is built inside the same `try` as the epoch loop."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

parser = argparse.ArgumentParser()
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

data = TensorDataset(torch.randn(300, 7), torch.randn(300, 2))
loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, shuffle=True))
model = nn.Sequential(nn.Linear(7, 40), nn.GELU(), nn.Linear(40, 2))
# sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
fully_shard(model, mesh=device_mesh)

try:
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(features), targets)
            loss.backward()
            if args.clip: torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
except KeyboardInterrupt:
    if dist.get_rank() == 0:
        print("stopped early")

model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
if dist.get_rank() == 0:
    torch.save(model_state, "model.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
