import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32 * 7 * 7, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.head(x.flatten(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    # fake 28x28 grayscale images
    images = torch.randn(6000, 1, 28, 28)
    labels = torch.randint(0, 10, (6000,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True)

    model = ConvNet()
    model.cuda()
    criterion = nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        for i, (x, y) in enumerate(loader):
            x = x.cuda()
            y = y.cuda()

            out = model(x)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if i % 20 == 0:
                print(f"epoch {epoch} iter {i} loss {loss.item():.4f}")

    torch.save(model.state_dict(), "convnet.pt")


if __name__ == "__main__":
    main()
