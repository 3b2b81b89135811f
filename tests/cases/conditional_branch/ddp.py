"""A regressor whose forward() adds an auxiliary correction only when asked to, and which drops
its middle block at random while training (layer drop)."""
import argparse
import random
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class DropNet(nn.Module):
    def __init__(self, width=32, drop=0.25):
        super().__init__()
        self.drop = drop
        self.stem = nn.Linear(4, width)
        self.middle = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.out = nn.Linear(width, 1)
        self.correction = nn.Linear(4, 1)

    def forward(self, x, corrected=False):
        h = torch.relu(self.stem(x))
        if not (self.training and random.random() < self.drop):
            h = h + self.middle(h)
        y = self.out(h)
        if corrected:
            y = y + self.correction(x)
        return y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    x = torch.randn(640, 4)
    y = torch.sin(x).sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=64, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = DropNet()
    model = DDP(model, find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        model.train()
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            error = nn.functional.mse_loss(model(x, corrected=True), y).item()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: corrected error {error:.4f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
