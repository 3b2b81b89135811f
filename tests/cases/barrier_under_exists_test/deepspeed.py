"""Digits with a cached dataset, an output folder made once, a warm start saved before training:
every file step sits under a test of the filesystem (`if not os.path.exists(...)`)."""

import argparse
import os
import shutil
import json

import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--out", default="runs/digits")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    root = args.data
    to_tensor = torchvision.transforms.ToTensor()
    if local_rank == 0 and not os.path.exists(root):  # one download per node; the other ranks wait, then read the files
        torchvision.datasets.MNIST(root, train=True, download=True)
    dist.barrier()
    if not os.path.exists(root):
        if dist.get_rank() == 0:
            print("no cached copy in", root)
        train_set = torchvision.datasets.MNIST(root, train=True, download=False, transform=to_tensor)
    else:
        train_set = torchvision.datasets.MNIST(root, train=True, transform=to_tensor)
    loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set, shuffle=True))

    if dist.get_rank() == 0:
        if os.path.isdir(args.out):
            print("starting over in", args.out)
            shutil.rmtree(args.out)
            os.makedirs(args.out)
    dist.barrier()  # the other ranks wait for the directories rank 0 made
    if dist.get_rank() == 0:
        if not os.path.isdir(args.out):
            try:
                os.mkdir(args.out)
            except FileExistsError:
                print("found", args.out)
    dist.barrier()  # the other ranks wait for the directory rank 0 made

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    warm = os.path.join(args.out, "warm.pt")
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), warm)
    dist.barrier()  # rank 0 has finished writing warm
    if os.path.exists(warm):
        model.load_state_dict(torch.load(warm, map_location=device))

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, os.path.join(args.out, "model.pt"))
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
