"""A two-input model run through the functional DataParallel when several GPUs are asked for."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    a, b = torch.randn(96, 6), torch.randn(96, 6)
    y = torch.randn(96, 3)
    train_dataset = TensorDataset(a, b, y)
    loader = DataLoader(train_dataset, batch_size=12, sampler=DistributedSampler(train_dataset, shuffle=True))
    net = Pair()
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
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
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
