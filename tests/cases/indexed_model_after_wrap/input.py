"""An nn.Sequential model whose layers are reached by index after training starts."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    pairs = TensorDataset(torch.randn(80, 5), torch.randn(80, 1))
    loader = DataLoader(pairs, batch_size=10, shuffle=True)
    regressor = nn.Sequential(nn.Linear(5, 20), nn.ReLU(), nn.Linear(20, 1))
    optimizer = torch.optim.SGD(regressor.parameters(), lr=0.05)
    for epoch in range(2):
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(regressor(features), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: output bias {regressor[-1].bias.item():.4f}")
    first = regressor[0]
    print("first layer weight norm", first.weight.norm().item())
    torch.save(regressor[2].state_dict(), "head.pt")


if __name__ == "__main__":
    main()
