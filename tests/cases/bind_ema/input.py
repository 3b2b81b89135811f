import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    ema = Net().to(device)
    model = Net().to(device)
    ema.load_state_dict(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for pe, pm in zip(ema.parameters(), model.parameters()):
                    pe.mul_(0.9).add_(pm, alpha=0.1)
        with torch.no_grad():
            x, y = next(iter(loader))
            print(epoch, (ema(x.to(device)).argmax(1) == y.to(device)).float().mean().item())
        torch.save(ema.state_dict(), "ema.pt")


if __name__ == "__main__":
    main()
