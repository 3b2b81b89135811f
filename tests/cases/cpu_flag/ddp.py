"""Regression on synthetic data; the GPU is opt-in with --cuda."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true", help="train on the GPU")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if args.cuda else "cpu")
    features = torch.randn(512, 8)
    targets = features.sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(features, targets)
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=True),
                        pin_memory=device.type == "cuda")

    model = Regressor(args.width).to(device)
    model = DDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        figures = torch.tensor([total], dtype=torch.float64)
        dist.all_reduce(figures)
        total = figures[0].item() / dist.get_world_size()  # the ranks' mean, as it is divided by len(loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {total / len(loader):.4f}")
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "regressor.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
