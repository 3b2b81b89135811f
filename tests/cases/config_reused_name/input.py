"""The training function calls its loader `data`; where the engine is created, `data` is the
sample count, an int: only `loader`, the DataLoader, gives the batch size. The loader helper's
default batch size is the config's number."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(samples, batch_size=32):
    dataset = TensorDataset(torch.randn(samples, 8), torch.randn(samples, 1))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def train_epoch(model, optimizer, data):
    for x, y in data:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    data = 1024
    loader = make_loader(data)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        print(f"epoch {epoch}: {train_epoch(model, optimizer, loader):.4f}")
    torch.save(model.state_dict(), "reused.pt")


if __name__ == "__main__":
    main()
