"""A dataset class that downloads in its constructor; the test set is built on the main process only."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms


class Digits(Dataset):
    def __init__(self, root, train):
        self.base = datasets.MNIST(root, train=train, download=True, transform=transforms.ToTensor())

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data")
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    train_set = Digits(args.data, True)
    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if args.local_rank in (-1, 0):
        test_set = Digits(args.data, False)
        print(len(test_set))


if __name__ == "__main__":
    main()
