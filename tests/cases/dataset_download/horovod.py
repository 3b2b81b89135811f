"""MNIST from torchvision, downloaded on first use."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="./data")
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    if local_rank == 0:  # one download per node; the other ranks wait, then read the files
        datasets.MNIST(args.data, train=True, download=True)
        datasets.MNIST(args.data, train=False, download=True)
    hvd.barrier()
    train_set = datasets.MNIST(args.data, train=True, download=False, transform=transform)
    test_loader = DataLoader(
        datasets.MNIST(args.data, train=False, download=False, transform=transform),
        batch_size=1000,
    )
    train_loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = Net().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: test accuracy {correct / 10000:.4f}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
