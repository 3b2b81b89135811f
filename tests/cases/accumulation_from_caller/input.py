"""Gradient accumulation whose count is an argument of the training function, given by its caller
from the command line."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def run_epochs(net, batches, opt, epochs, accum_every=1):
    for epoch in range(epochs):
        for step, (inputs, targets) in enumerate(batches):
            loss = nn.functional.mse_loss(net(inputs), targets) / accum_every
            loss.backward()
            if (step + 1) % accum_every == 0:
                opt.step()
                opt.zero_grad()
        print(f"epoch {epoch} done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-every", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    net = nn.Linear(6, 1)
    batches = DataLoader(TensorDataset(torch.randn(80, 6), torch.randn(80, 1)), batch_size=10, shuffle=True)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    run_epochs(net, batches, opt, args.epochs, accum_every=args.accum_every)
