"""The model is built in main(); the function that trains it builds its own optimizer."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, epochs, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for epoch in range(epochs):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    data = TensorDataset(torch.randn(512, 12), torch.randint(0, 2, (512,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    train(model, loader, epochs=3, lr=3e-4)
    torch.save(model.state_dict(), "classifier.pt")


if __name__ == "__main__":
    main()
