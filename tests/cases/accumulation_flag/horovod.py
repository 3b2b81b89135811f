"""Gradient accumulation whose update test is kept in a variable, and whose forward runs in a helper."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def batch_loss(model, features, labels):
    return nn.functional.cross_entropy(model(features), labels)


def main():
    data = TensorDataset(torch.randn(330, 16), torch.randint(0, 5, (330,)))
    loader = DataLoader(data, batch_size=10, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    accumulation_steps = 4
    for epoch in range(3):
        for index, (features, labels) in enumerate(loader):
            loss = batch_loss(model, features, labels) / accumulation_steps
            loss.backward()
            update_now = (index + 1) % accumulation_steps == 0 or index + 1 == len(loader)
            if update_now:
                optimizer.step()
                optimizer.zero_grad()
    torch.save(model.state_dict(), "accumulated.pt")


if __name__ == "__main__":
    main()
