"""Hyperparameters live in the wandb config, and the run's name picks the checkpoint folder."""
import os

import torch
import torch.nn as nn
import wandb
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    run = wandb.init(project="sweeps-demo", config={"lr": 0.01, "batch_size": 32, "epochs": 3}, mode=None if hvd.rank() == 0 else "disabled")
    config = wandb.config
    out_dir = os.path.join("checkpoints", run.name)

    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=config.batch_size, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(6, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(config.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            run.log({"loss": loss.item(), "epoch": epoch})
    run.summary["final_loss"] = loss.item()
    if hvd.rank() == 0:
        torch.save(model.state_dict(), os.path.join(out_dir, "model.pt"))
        run.finish()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
