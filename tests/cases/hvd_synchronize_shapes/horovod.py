"""Training steps written in a few compact shapes."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def clip(model, limit):
    torch.nn.utils.clip_grad_norm_(model.parameters(), limit)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clip", type=float, default=0.0)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward(); optimizer.step()
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            if args.clip > 0:
                optimizer.synchronize()  # average the gradients across ranks before they are read
                clip(model, args.clip)
                with optimizer.skip_synchronize():
                    optimizer.step()
            else:
                optimizer.step()
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.synchronize()  # average the gradients across ranks before they are read
            clip(model, 1.0)
            if epoch == 0:
                with optimizer.skip_synchronize():
                    optimizer.step()
            else:
                with optimizer.skip_synchronize():
                    optimizer.step()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
