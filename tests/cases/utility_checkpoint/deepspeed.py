"""Fine-tunes a classifier; checkpoints go through the project's own helper module."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils import *  # save_checkpoint, AverageMeter

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def validate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item()
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    x, y = torch.randn(2048, 10), torch.randint(0, 2, (2048,))
    train_dataset = TensorDataset(x[:1792], y[:1792])
    train_loader = DataLoader(train_dataset, batch_size=64, sampler=DistributedSampler(train_dataset, shuffle=True))
    val_loader = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=256)

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    best = float("inf")
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        for inputs, targets in train_loader:
            loss = criterion(model(inputs), targets)
            model.backward(loss)
            model.step()
        val_loss = validate(model, val_loader, criterion)
        scheduler.step(val_loss)
        is_best = val_loss < best
        best = min(best, val_loss)
        with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
            model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
        if dist.get_rank() == 0:
            save_checkpoint({"epoch": epoch, "state_dict": model_state, "best": best}, is_best)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
