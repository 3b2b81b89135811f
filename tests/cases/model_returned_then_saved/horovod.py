"""Fits a small regressor in fit(), which hands the trained network back to the caller: the
caller saves its weights, then rebuilds a fresh network from the file to check it loads."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def fit():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--save", default="regressor.pt")
    options = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 6), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=options.batch_size, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False))
    net = Regressor()
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
    for epoch in range(options.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
    return options.save, net


if __name__ == "__main__":
    path, net = fit()
    if hvd.rank() == 0:
        torch.save(net.state_dict(), path)
    check = Regressor()
    if hvd.rank() == 0:
        check.load_state_dict(torch.load(path, map_location=torch.device(f"cuda:{hvd.local_rank()}" if torch.cuda.is_available() else "cpu")))
        print("reloaded", sum(p.numel() for p in check.parameters()), "weights")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()
