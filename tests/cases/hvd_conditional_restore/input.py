"""Resumes from a checkpoint through a helper that builds a new optimizer and loads its state."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def load_checkpoint(net, path):
    saved = torch.load(path)
    net.load_state_dict(saved["weights"])
    fresh = torch.optim.Adam(net.parameters(), lr=2e-4)
    fresh.load_state_dict(saved["optimizer"])
    return fresh


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    generator = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    gen_opt = torch.optim.Adam(generator.parameters(), lr=2e-4)
    if args.resume:
        gen_opt = load_checkpoint(generator, args.resume)
    loader = DataLoader(TensorDataset(torch.randn(256, 16)), batch_size=32, shuffle=True)
    for epoch in range(args.epochs):
        for (noise,) in loader:
            gen_opt.zero_grad()
            loss = generator(noise).pow(2).mean()
            loss.backward()
            gen_opt.step()
        print("epoch", epoch, "loss", loss.item())
    torch.save({"weights": generator.state_dict(), "optimizer": gen_opt.state_dict()}, "checkpoint.pt")


if __name__ == "__main__":
    main()
