# A train/validation split drawn before any seed: each rank would draw its own split.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


def main():
    dataset = TensorDataset(torch.randn(100, 4), torch.randn(100, 1))
    train_set, valid_set = random_split(dataset, [80, 20])
    loader = DataLoader(train_set, batch_size=8, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=20)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            valid = sum(nn.functional.mse_loss(model(x), y).item() for x, y in valid_loader)
        print(f"epoch {epoch}: valid {valid:.4f}")


if __name__ == "__main__":
    main()
