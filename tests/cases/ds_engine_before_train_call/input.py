# The model is printed after the optimizer is built, then a training function is called:
# deepspeed.initialize goes after the print (the plain module's summary) and before the call.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(model)
    train(model, loader, optimizer, epochs=2)
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
