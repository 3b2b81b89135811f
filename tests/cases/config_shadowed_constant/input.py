"""A module constant read by the training code, and a local of the same name in the evaluation
code: the training loader's batch size is the module's (64), not the evaluation's (512)."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

batch_size = 64
epochs = 3


def evaluate(model, dataset):
    batch_size = 512
    loader = DataLoader(dataset, batch_size=batch_size)
    with torch.no_grad():
        return sum(nn.functional.mse_loss(model(x), y).item() for x, y in loader) / len(loader)


def main():
    dataset = TensorDataset(torch.randn(1024, 8), torch.randn(1024, 1))
    train_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {evaluate(model, dataset):.4f}")
    torch.save(model.state_dict(), "shadowed.pt")


if __name__ == "__main__":
    main()
