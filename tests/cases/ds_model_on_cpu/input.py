"""A plain CPU classifier: the network is never moved, and its batches come straight from the loader."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.out = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.out(torch.relu(self.conv(x)).flatten(1))


def main():
    images = TensorDataset(torch.randn(96, 1, 8, 8), torch.randint(0, 10, (96,)))
    loader = DataLoader(images, batch_size=12, shuffle=True)
    cnn = CNN()
    optimizer = torch.optim.Adam(cnn.parameters(), lr=1e-3)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            output = cnn(x)
            loss = nn.functional.cross_entropy(output, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 4 == 0:
                predicted = torch.max(output, 1)[1].data.numpy()
                print(epoch, loss.item(), (predicted == y.data.numpy()).mean())


if __name__ == "__main__":
    main()
