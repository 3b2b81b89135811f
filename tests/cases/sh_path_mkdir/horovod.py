"""Folders made with pathlib and os on every rank."""
import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="out")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "figures").mkdir(exist_ok=True)
    os.makedirs(os.path.join(args.out, "ckpt"), exist_ok=True)
    run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    if hvd.rank() == 0:
        run_dir.mkdir(parents=True)
    hvd.barrier()  # the other ranks wait for the directory rank 0 made
    if hvd.rank() == 0:
        try:
            os.mkdir("cache")
        except FileExistsError:
            print("cache already there")
    hvd.barrier()  # the other ranks wait for the directory rank 0 made

    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=16, sampler=DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            torch.save(model.state_dict(), run_dir / f"model{epoch}.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
