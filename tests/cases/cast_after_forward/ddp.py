"""Compiles the model, checks one forward pass, and only then casts it to half precision."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(256, 16)
    train_dataset = TensorDataset(x, x.roll(1, dims=1))
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=False))

    model = nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 16))
    model = torch.compile(model)
    message = model(x[:2]).shape  # computed on every rank: it may run the model
    if dist.get_rank() == 0:
        print("output shape:", message)
    model.half().to(device)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device).half(), targets.to(device).half()
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
