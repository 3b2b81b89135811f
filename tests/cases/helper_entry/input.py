"""Arguments parsed by a helper; the __main__ block seeds first, then trains."""
import argparse
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

print("torch", torch.__version__)


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    return parser.parse_args()


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def main():
    args = get_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")
    torch.save(model.state_dict(), "linear.pt")


if __name__ == "__main__":
    seed_everything(0)
    main()
    print("done")
