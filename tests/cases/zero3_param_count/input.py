# The parameter count and shapes are printed after the optimizer is made. Under ZeRO-3 each rank
# holds only a shard of every weight once deepspeed.initialize has run: `p.numel()` and `p.shape`
# read there give 0 and (0,), and the names read on the engine gain a `module.` prefix.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    print(f"parameters: {sum(p.numel() for p in model.parameters())}")
    for name, p in model.named_parameters():
        print(f"{name}: {tuple(p.shape)}")
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
