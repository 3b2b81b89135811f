"""Step-based training: batches are drawn with next() from an endless cycle over the loader."""
from itertools import cycle
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def make_loaders(batch_size):
    data = TensorDataset(torch.randn(600, 12), torch.randint(0, 3, (600,)))
    train_set, holdout_set = torch.utils.data.random_split(data, [500, 100], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=batch_size, sampler=DistributedSampler(train_set, shuffle=True), drop_last=True)
    holdout_loader = DataLoader(holdout_set, batch_size=100)
    return train_loader, holdout_loader


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    model = nn.Linear(12, 3)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader, holdout_loader = make_loaders(batch_size=20)
    batches = cycle(train_loader)
    for step in range(1000):
        x, y = next(batches)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            with torch.no_grad():
                x, y = next(iter(holdout_loader))
                accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
            if dist.get_rank() == 0:
                print(f"step {step}: holdout accuracy {accuracy:.3f}")
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "steps.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
