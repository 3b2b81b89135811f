"""A dataset class that downloads in its constructor; the test set is built on the main process only."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    train_set = Digits(args.data, True)
    loader = DataLoader(train_set, batch_size=32, sampler=DistributedSampler(train_set, shuffle=True))
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
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
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
