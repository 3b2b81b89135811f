"""A two-input model run through the functional DataParallel when several GPUs are asked for."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(6, 3)
        self.right = nn.Linear(6, 3)

    def forward(self, a, b):
        return self.left(a) + self.right(b)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=0)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    a, b = torch.randn(96, 6), torch.randn(96, 6)
    y = torch.randn(96, 3)
    train_dataset = TensorDataset(a, b, y)
    loader = DataLoader(train_dataset, batch_size=12, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    net = Pair()
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for left, right, target in loader:
            if args.gpus > 1:
                out = net(left, right)
            else:
                out = net(left, right)
            loss = (out - target).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
