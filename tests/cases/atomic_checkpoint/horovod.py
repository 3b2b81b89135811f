"""Checkpoints written atomically (temp file, then rename); the best one is reloaded for the test."""
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def save_atomic(state, path):
    tmp = path + ".tmp"
    if hvd.rank() == 0:
        torch.save(state, tmp)
        os.replace(tmp, path)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    train = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    val = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
    train_loader = DataLoader(train, batch_size=32, sampler=DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    val_loader = DataLoader(val, batch_size=64)
    model = nn.Linear(10, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    best = 0.0
    for epoch in range(5):
        train_loader.sampler.set_epoch(epoch)
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            x, y = next(iter(val_loader))
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        save_atomic(model.state_dict(), "last.pt")
        if accuracy > best:
            best = accuracy
            if hvd.rank() == 0:
                shutil.copyfile("last.pt", "best.pt")
        if hvd.rank() == 0:
            if os.path.exists(f"epoch{epoch - 2}.pt"):
                os.remove(f"epoch{epoch - 2}.pt")
            torch.save(model.state_dict(), f"epoch{epoch}.pt")

    hvd.barrier()  # rank 0 has finished writing "best.pt"
    model.load_state_dict(torch.load("best.pt", map_location=device))
    if hvd.rank() == 0:
        print("best accuracy", best)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
