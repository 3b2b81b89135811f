"""Checkpoints written atomically (temp file, then rename); the best one is reloaded for the test."""
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    StateDictOptions,
    set_model_state_dict,
)


def save_atomic(state, path):
    tmp = path + ".tmp"
    if dist.get_rank() == 0:
        torch.save(state, tmp)
        os.replace(tmp, path)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    train = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    val = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
    train_loader = DataLoader(train, batch_size=32, sampler=DistributedSampler(train, shuffle=True))
    val_loader = DataLoader(val, batch_size=64)
    model = nn.Linear(10, 2)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    best = 0.0
    for epoch in range(5):
        train_loader.sampler.set_epoch(epoch)
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            x, y = next(iter(val_loader))
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        save_atomic(model_state, "last.pt")
        if accuracy > best:
            best = accuracy
            if dist.get_rank() == 0:
                shutil.copyfile("last.pt", "best.pt")
        if dist.get_rank() == 0:
            if os.path.exists(f"epoch{epoch - 2}.pt"):
                os.remove(f"epoch{epoch - 2}.pt")
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        if dist.get_rank() == 0:
            torch.save(model_state, f"epoch{epoch}.pt")

    dist.barrier()  # rank 0 has finished writing "best.pt"
    set_model_state_dict(model, torch.load("best.pt", map_location=device), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    if dist.get_rank() == 0:
        print("best accuracy", best)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
