"""Gradient accumulation whose count is an argument of the training function, given by its caller
from the command line."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def run_epochs(net, batches, opt, epochs, accum_every=1):
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for step, (inputs, targets) in enumerate(batches):
            loss = nn.functional.mse_loss(net(inputs), targets) / accum_every
            loss.backward()
            if (step + 1) % accum_every == 0:
                opt.step()
                opt.zero_grad()
        if hvd.rank() == 0:
            print(f"epoch {epoch} done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-every", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    net = nn.Linear(6, 1)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    train_dataset = TensorDataset(torch.randn(80, 6), torch.randn(80, 1))
    batches = DataLoader(train_dataset, batch_size=10, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=net.named_parameters(), backward_passes_per_step=args.accum_every)
    run_epochs(net, batches, opt, args.epochs, accum_every=args.accum_every)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()
