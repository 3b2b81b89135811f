"""Regression on a small table, read forever through a seeded sampler with replacement."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    features = torch.randn(256, 8)
    targets = features.sum(dim=1, keepdim=True)
    dataset = TensorDataset(features, targets)
    g = torch.Generator()
    g.manual_seed(0 + dist.get_rank())
    sampler = RandomSampler(dataset, replacement=True, num_samples=10**9, generator=g)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = nn.Linear(8, 1)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step == 50:
            break
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "regressor.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
