"""Keeps the best model in a file written and read through open() handles."""
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
)

BEST = "best_model.pt"


def save_best(model, path):
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        with open(path, "wb") as handle:
            torch.save(model_state, handle)


def load_best(model, path):
    dist.barrier()  # rank 0 has finished writing path
    with open(path, "rb") as handle:
        set_model_state_dict(model, torch.load(handle), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    best = float("inf")
    for epoch in range(5):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if total < best:
            best = total
            save_best(model, BEST)
    load_best(model, BEST)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
