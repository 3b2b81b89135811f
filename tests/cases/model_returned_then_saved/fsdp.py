"""Fits a small regressor in fit(), which hands the trained network back to the caller: the
caller saves its weights, then rebuilds a fresh network from the file to check it loads."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 6), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=options.batch_size, sampler=DistributedSampler(data, shuffle=False))
    net = Regressor()
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(options.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
    return options.save, net


if __name__ == "__main__":
    path, net = fit()
    net_state = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if os.environ.get("RANK", "0") == "0":
        torch.save(net_state, path)
    check = Regressor()
    if os.environ.get("RANK", "0") == "0":
        check.load_state_dict(torch.load(path, map_location=torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")))
        print("reloaded", sum(p.numel() for p in check.parameters()), "weights")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
