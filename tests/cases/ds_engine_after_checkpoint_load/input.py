# A checkpoint is loaded into the model and the optimizer after both are built, before training:
# deepspeed.initialize goes after the loads, so they fill the plain module and torch optimizer.
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    args = parser.parse_args()
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = 0
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        start = checkpoint["epoch"] + 1
    criterion = nn.MSELoss()
    for epoch in range(start, 5):
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save({"model": model.state_dict(), "epoch": epoch}, "checkpoint.pt")


if __name__ == "__main__":
    main()
