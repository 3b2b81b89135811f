"""The training loader comes from the project's data module; only the validation loader is built here."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from data import build_train_loader


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        losses = [nn.functional.mse_loss(model(x), y).item() for x, y in loader]
    model.train()
    return sum(losses) / len(losses)


def main():
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train_loader = build_train_loader(batch_size=32)
    val_loader = DataLoader(TensorDataset(torch.randn(64, 6), torch.randn(64, 1)), batch_size=64)
    for epoch in range(5):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: val loss {evaluate(model, val_loader):.4f}")
    torch.save(model.state_dict(), "elsewhere.pt")


if __name__ == "__main__":
    main()
