import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    StateDictOptions,
    set_model_state_dict,
    set_optimizer_state_dict,
    get_optimizer_state_dict,
)


def named_optimizer_state(model, optimizer, state):
    """`state` keyed by parameter names, as set_optimizer_state_dict wants it: a state dict saved
    by the single-process script numbers the parameters in the order of the optimizer's groups."""
    if not state or not any(isinstance(key, int) for key in state["state"]):
        return state
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    ordered = [names[id(parameter)] for group in optimizer.param_groups for parameter in group["params"]]
    return {
        "state": {ordered[key]: value for key, value in state["state"].items()},
        "param_groups": [{**group, "params": [ordered[key] for key in group["params"]]} for group in state["param_groups"]],
    }


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


parser = argparse.ArgumentParser()
parser.add_argument("--resume", default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = "cuda" if torch.cuda.is_available() else "cpu"
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, shuffle=True))

model = Regressor()
# FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
fully_shard(model.encoder)  # called directly, not only through model's forward
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
if args.resume:
    state = torch.load(args.resume, map_location=device)
    set_model_state_dict(model, state["model"], options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False))
    set_optimizer_state_dict(model, optimizer, named_optimizer_state(model, optimizer, state["optimizer"]), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
model = model.to(device)
best_loss = float("inf")
best_state = None

for epoch in range(args.epochs):
    loader.sampler.set_epoch(epoch)
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    # the epoch's figures over every rank's batches, not only this rank's share
    figures = torch.tensor([total], dtype=torch.float64)
    dist.all_reduce(figures)
    total = figures[0].item() / dist.get_world_size()  # the ranks' mean, as it is divided by len(loader)
    scheduler.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch} loss {total / len(loader):.4f}")
    features = model.encoder(torch.randn(4, 8, device=device))
    if dist.get_rank() == 0:
        print("feature norm", features.norm().item())

model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
optimizer_state = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full state
if dist.get_rank() == 0:
    torch.save({"model": model_state, "optimizer": optimizer_state}, "regressor.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
