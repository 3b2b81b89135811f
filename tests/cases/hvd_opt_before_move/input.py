"""The optimizer is built before the model is moved to the GPU (`--cuda`), as older scripts do."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(model)
    if args.cuda:
        model.cuda()

    data = TensorDataset(torch.randn(128, 10), torch.randint(0, 3, (128,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    for epoch in range(args.epochs):
        for x, y in loader:
            if args.cuda:
                x, y = x.cuda(), y.cuda()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
