"""Regression on points that sit on a curve, read from an archive the script fetches first."""

import argparse
import os
import tarfile
import urllib.request

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

ARCHIVE_URL = "https://example.org/datasets/curve-v2.tar.gz"


def fetch_archive(url, archive, dest):
    print(f"fetching {url}")
    with urllib.request.urlopen(url) as response, open(archive, "wb") as out:
        out.write(response.read())
    with tarfile.open(archive) as tar:
        tar.extractall(dest)
    os.rename(os.path.join(dest, "curve-v2"), os.path.join(dest, "curve"))
    os.remove(archive)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    if local_rank == 0:
        if not os.path.isdir(os.path.join(args.data, "curve")):
            os.makedirs(args.data, exist_ok=True)
            fetch_archive(ARCHIVE_URL, os.path.join(args.data, "curve.tar.gz"), args.data)
    dist.barrier()  # one download per node; the other ranks wait for its files

    points = np.load(os.path.join(args.data, "curve", "points.npy"))
    x = torch.tensor(points[:, :1], dtype=torch.float32)
    y = torch.tensor(points[:, 1:], dtype=torch.float32)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
    model = DDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "curve.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
