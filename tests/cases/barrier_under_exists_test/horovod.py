"""Digits with a cached dataset, an output folder made once, a warm start saved before training:
every file step sits under a test of the filesystem (`if not os.path.exists(...)`)."""

import argparse
import os
import shutil

import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--out", default="runs/digits")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    root = args.data
    to_tensor = torchvision.transforms.ToTensor()
    if local_rank == 0 and not os.path.exists(root):  # one download per node; the other ranks wait, then read the files
        torchvision.datasets.MNIST(root, train=True, download=True)
    hvd.barrier()
    if not os.path.exists(root):
        if hvd.rank() == 0:
            print("no cached copy in", root)
        train_set = torchvision.datasets.MNIST(root, train=True, download=False, transform=to_tensor)
    else:
        train_set = torchvision.datasets.MNIST(root, train=True, transform=to_tensor)
    loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    if hvd.rank() == 0:
        if os.path.isdir(args.out):
            print("starting over in", args.out)
            shutil.rmtree(args.out)
            os.makedirs(args.out)
    hvd.barrier()  # the other ranks wait for the directories rank 0 made
    if hvd.rank() == 0:
        if not os.path.isdir(args.out):
            try:
                os.mkdir(args.out)
            except FileExistsError:
                print("found", args.out)
    hvd.barrier()  # the other ranks wait for the directory rank 0 made

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    warm = os.path.join(args.out, "warm.pt")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), warm)
    hvd.barrier()  # rank 0 has finished writing warm
    if os.path.exists(warm):
        model.load_state_dict(torch.load(warm, map_location=device))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
