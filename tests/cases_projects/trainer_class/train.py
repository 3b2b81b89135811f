"""Fits a regressor through the Trainer class of trainer.py."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Trainer


def toy_data():
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(160, 6, generator=generator)
    return TensorDataset(inputs, inputs.sum(dim=1, keepdim=True).tanh())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save", default="regressor.pt")
    args = parser.parse_args()
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    loader = DataLoader(toy_data(), batch_size=args.batch_size, shuffle=False)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01))
    trainer.fit(loader, args.epochs)
    torch.save(trainer.model.state_dict(), args.save)


if __name__ == "__main__":
    main()
