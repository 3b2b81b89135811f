"""The model carries its own batch size: `model.batch_size` is an attribute of a module, not a
value the DeepSpeed config is overwritten from; the loader's own batch_size is."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.batch_size = 32
        self.net = nn.Linear(8, 1)

    def forward(self, x):
        return self.net(x)


def main():
    model = Regressor()
    dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(dataset, batch_size=model.batch_size, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "regressor.pt")


if __name__ == "__main__":
    main()
