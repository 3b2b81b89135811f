"""A dataset class that downloads in its constructor; the test set is built on the main process only."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


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

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    train_set = Digits(args.data, True)
    loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if args.local_rank in (-1, 0):
        test_set = Digits(args.data, False)
        print(len(test_set))
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
