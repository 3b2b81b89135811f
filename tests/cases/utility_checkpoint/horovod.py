"""Fine-tunes a classifier; checkpoints go through the project's own helper module."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils import *  # save_checkpoint, AverageMeter
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


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
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    x, y = torch.randn(2048, 10), torch.randint(0, 2, (2048,))
    train_dataset = TensorDataset(x[:1792], y[:1792])
    train_loader = DataLoader(train_dataset, batch_size=64, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    val_loader = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=256)

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)

    best = float("inf")
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        val_loss = validate(model, val_loader, criterion)
        scheduler.step(val_loss)
        is_best = val_loss < best
        best = min(best, val_loss)
        if hvd.rank() == 0:
            save_checkpoint({"epoch": epoch, "state_dict": model.state_dict(), "best": best}, is_best)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
