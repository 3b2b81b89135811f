"""The model is built in main() and handed to train(), which builds the optimizer and trains it."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, epochs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for epoch in range(epochs):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(3)
    data = TensorDataset(torch.randn(256, 12, generator=generator), torch.randint(0, 3, (256,), generator=generator))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    train(model, loader, epochs=2)
    torch.save(model.state_dict(), "classifier.pt")


if __name__ == "__main__":
    main()
