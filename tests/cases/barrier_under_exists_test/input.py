"""Digits with a cached dataset, an output folder made once, a warm start saved before training:
every file step sits under a test of the filesystem (`if not os.path.exists(...)`)."""

import argparse
import os
import shutil

import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--out", default="runs/digits")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    root = args.data
    to_tensor = torchvision.transforms.ToTensor()
    if not os.path.exists(root):
        print("no cached copy in", root)
        train_set = torchvision.datasets.MNIST(root, train=True, download=True, transform=to_tensor)
    else:
        train_set = torchvision.datasets.MNIST(root, train=True, transform=to_tensor)
    loader = DataLoader(train_set, batch_size=64, shuffle=True)

    if os.path.isdir(args.out):
        print("starting over in", args.out)
        shutil.rmtree(args.out)
        os.makedirs(args.out)
    if not os.path.isdir(args.out):
        try:
            os.mkdir(args.out)
        except FileExistsError:
            print("found", args.out)

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    warm = os.path.join(args.out, "warm.pt")
    torch.save(model.state_dict(), warm)
    if os.path.exists(warm):
        model.load_state_dict(torch.load(warm))

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))


if __name__ == "__main__":
    main()
