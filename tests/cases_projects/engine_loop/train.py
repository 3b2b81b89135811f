"""Trains a small classifier; the step of each epoch lives in engine.py."""

import argparse

import torch
from torch import nn

from engine import train_one_epoch
from utils import make_loader, say


def build_model(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = build_model(args.width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = make_loader(samples=256, batch_size=32)
    for epoch in range(args.epochs):
        mean_loss = train_one_epoch(model, loader, optimizer)
        say(f"epoch {epoch}: loss {mean_loss:.4f}")
    torch.save(model.state_dict(), "classifier.pt")
