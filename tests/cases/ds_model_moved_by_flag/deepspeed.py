"""The network and its batches go to the GPU only when --cuda is given."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(128, 20), torch.randn(128, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 1))
    if args.cuda:
        model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            if args.cuda:
                features, targets = features.to(device), targets.to(device)
            loss = nn.functional.mse_loss(model(features), targets)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(epoch, loss.item())
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
