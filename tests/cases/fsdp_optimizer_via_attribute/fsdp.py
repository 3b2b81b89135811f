"""A trainer class that builds its optimizer over a local name, then keeps both on self."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler


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
        self.batches = DataLoader(points, batch_size=12, sampler=DistributedSampler(points, shuffle=True))
        net = Regressor()
        # FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
        fully_shard(net)
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.net, self.opt = net, opt
        if torch.cuda.is_available():
            self.net = self.net.to(torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu"))

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
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    fitter = Fitter(lr=0.01)
    for epoch in range(3):
        fitter.one_pass()
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
