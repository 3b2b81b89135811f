"""Regression on points that sit on a curve, read from an archive the script fetches first."""

import argparse
import os
import tarfile
import urllib.request
import json

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

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
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

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
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "curve.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
