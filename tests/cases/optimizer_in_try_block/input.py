"""Training that can be stopped with Ctrl+C: the optimizer is built inside the same `try` as the epoch loop."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

data = TensorDataset(torch.randn(300, 7), torch.randn(300, 2))
loader = DataLoader(data, batch_size=20, shuffle=True)
model = nn.Sequential(nn.Linear(7, 40), nn.GELU(), nn.Linear(40, 2))

try:
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(features), targets)
            loss.backward()
            if args.clip: torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
except KeyboardInterrupt:
    print("stopped early")

torch.save(model.state_dict(), "model.pt")
