"""Fits a small regressor in fit(), which hands the trained network back to the caller: the
caller saves its weights, then rebuilds a fresh network from the file to check it loads."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


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
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    options = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 6), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=options.batch_size, sampler=DistributedSampler(data, shuffle=False))
    net = Regressor()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = options.batch_size
    net, optimizer, _, _ = deepspeed.initialize(model=net, optimizer=optimizer, config=ds_config)
    for epoch in range(options.epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(net(x), y)
            net.backward(loss)
            net.step()
    return options.save, net


if __name__ == "__main__":
    path, net = fit()
    with deepspeed.zero.GatheredParameters(list(net.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        net_state = {name: tensor.detach().cpu().clone() for name, tensor in net.module.state_dict().items()}
    if os.environ.get("RANK", "0") == "0":
        torch.save(net_state, path)
    check = Regressor()
    if os.environ.get("RANK", "0") == "0":
        check.load_state_dict(torch.load(path, map_location=torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")))
        print("reloaded", sum(p.numel() for p in check.parameters()), "weights")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
