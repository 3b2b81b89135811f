# A Trainer built from the model and optimizer loads starting weights in a method called after it
# is built. The DeepSpeed engine is made in __init__, so the load comes after deepspeed.initialize:
# ZeRO-3 refuses it (its weights are empty shards), ZeRO-1/2 undo it at the first step (they step
# their own fp32 copy of the weights made at initialize).
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader

    def load(self, path):
        self.model.load_state_dict(torch.load(path, map_location="cpu"))

    def train(self, epochs):
        for epoch in range(epochs):
            for xb, yb in self.loader:
                loss = nn.functional.mse_loss(self.model(xb), yb)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", type=str, default=None, help="start from these weights")
    args = parser.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01), loader)
    if args.init:
        trainer.load(args.init)
    trainer.train(2)
    torch.save(trainer.model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
