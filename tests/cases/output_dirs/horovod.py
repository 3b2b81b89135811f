"""Output folders: a fresh run folder each time, a checkpoint folder kept between runs."""
import argparse
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", default="runs/latest")
    parser.add_argument("--ckpt-dir", default="checkpoints")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    # start from an empty run folder
    if hvd.rank() == 0:
        if os.path.exists(args.run_dir):
            shutil.rmtree(args.run_dir)
        os.mkdir(args.run_dir)
        os.mkdir(os.path.join(args.run_dir, "samples"))
    hvd.barrier()  # the other ranks wait for the directories rank 0 made

    if not os.path.exists(args.ckpt_dir):
        os.makedirs(args.ckpt_dir, exist_ok=True)
    try:
        os.makedirs("logs")
    except FileExistsError:
        pass

    dataset = TensorDataset(torch.randn(128, 4), torch.randn(128, 1))
    loader = DataLoader(dataset, batch_size=16, sampler=DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        epoch_dir = os.path.join(args.ckpt_dir, f"epoch{epoch}")
        if not os.path.isdir(epoch_dir):
            os.makedirs(epoch_dir, exist_ok=True)
        if hvd.rank() == 0:
            torch.save(model.state_dict(), os.path.join(epoch_dir, "model.pt"))
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
