"""Fits a small classifier; the loader comes from data.py, the epoch from engine.py, the save from
checkpoint.py."""

import argparse

import torch
from torch import nn

import engine
from checkpoint import save_weights
from data import make_loader

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--save", default="classifier.pt")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = make_loader(args.batch_size)
    for epoch in range(args.epochs):
        loss = engine.train_one_epoch(model, loader, optimizer)
        print(f"epoch {epoch} loss {loss:.4f}")
    save_weights(model, args.save)
