# main() parses the command line, then returns what training returns: the group must outlive it.
import argparse
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(args):
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8, shuffle=True)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("done")
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    return train(args)


if __name__ == "__main__":
    main()
