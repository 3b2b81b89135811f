"""Accumulation that steps on the micro-steps left over at the end of each epoch as well."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 4


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    loader = DataLoader(TensorDataset(torch.randn(300, 10), torch.randn(300, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        optimizer.zero_grad()
        for step, (x, y) in enumerate(loader, start=1):
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y) / ACCUMULATE
            loss.backward()
            if step % ACCUMULATE == 0:
                optimizer.step()
                optimizer.zero_grad()
        optimizer.step()  # the batches left over after the last full window
        optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
