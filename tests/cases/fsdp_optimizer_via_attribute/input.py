"""A trainer class that builds its optimizer over a local name, then keeps both on self."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class Fitter:
    def __init__(self, lr):
        points = TensorDataset(torch.randn(96, 6), torch.randn(96, 1))
        self.batches = DataLoader(points, batch_size=12, shuffle=True)
        net = Regressor()
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.net, self.opt = net, opt
        if torch.cuda.is_available():
            self.net = self.net.cuda()

    def one_pass(self):
        total = 0.0
        for x, y in self.batches:
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.net(x), y)
            loss.backward()
            self.opt.step()
            total += loss.item()
        return total


def main():
    fitter = Fitter(lr=0.01)
    for epoch in range(3):
        fitter.one_pass()


if __name__ == "__main__":
    main()
