import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--resume", default="")
    parser.add_argument("--out", default="ckpt.pt")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False)
    model = Net().to(device)
    start = 0
    if args.resume:
        state = torch.load(args.resume, map_location=device)
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.resume:
        optimizer.load_state_dict(state["optimizer"])
    for epoch in range(start, start + args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            print(f"loss {loss.item():.6f}")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, args.out)


if __name__ == "__main__":
    main()
