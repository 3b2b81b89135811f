"""Fine-tunes with Adam, then switches to plain SGD over the head once the loss plateaus."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Finetuner:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)

    def plateau(self):
        head_only = torch.optim.SGD(self.net[-1].parameters(), lr=1e-2)
        self.opt = head_only

    def run(self, loader, epochs):
        previous = None
        for epoch in range(epochs):
            running = 0.0
            for inputs, labels in loader:
                self.opt.zero_grad()
                loss = nn.functional.cross_entropy(self.net(inputs), labels)
                loss.backward()
                self.opt.step()
                running += loss.item()
            if previous is not None and running > 0.99 * previous:
                self.plateau()
            previous = running


def main():
    torch.manual_seed(1)
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    Finetuner(net).run(DataLoader(data, batch_size=8), 5)
    torch.save(net.state_dict(), "finetuned.pt")


if __name__ == "__main__":
    main()
