"""Uses what model.eval() and model.train() return: the module itself, in plain PyTorch."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def mean_error(net, data):
    with torch.no_grad():
        return sum(nn.functional.l1_loss(net(x), y).item() for x, y in data) / len(data)


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    samples = TensorDataset(torch.randn(128, 3), torch.randn(128, 2))
    loader = DataLoader(samples, batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(3, 12), nn.GELU(), nn.Linear(12, 2)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for epoch in range(3):
        model.train().to(device)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.l1_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        error = mean_error(model.eval(), loader)
        print(f"epoch {epoch}: error {error:.4f}")
    model.eval().cpu()
    torch.save(model.state_dict(), "chains.pt")


if __name__ == "__main__":
    main()
