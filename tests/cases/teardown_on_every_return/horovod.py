"""Trains until a step budget is spent: the loop never ends by itself, the function returns."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        total = sum(nn.functional.mse_loss(model(x), y).item() for x, y in loader)
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--test-only", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--max-epochs", type=int, default=0)
    opts = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = nn.Linear(8, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    if opts.test_only:
        if hvd.rank() == 0:
            print("loss", evaluate(model, loader))
        hvd.barrier()  # no rank exits while rank 0 still writes its files
        hvd.shutdown()
        return
    if opts.dry_run:
        result = evaluate(model, loader)
        hvd.barrier()  # no rank exits while rank 0 still writes its files
        hvd.shutdown()
        return result

    def lr_at(step):
        if step < 10:
            return 0.01 * step
        return 0.1

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    epoch, step = 0, 0
    while True:
        epoch += 1
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step) * hvd.size()
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if step >= opts.steps:
                if hvd.rank() == 0:
                    torch.save(model.state_dict(), "last.pt")
                hvd.barrier()  # no rank exits while rank 0 still writes its files
                hvd.shutdown()
                return
        if hvd.rank() == 0:
            print("epoch", epoch, "done")
        if opts.max_epochs and epoch >= opts.max_epochs:
            if hvd.rank() == 0:
                print("epoch budget spent")
            hvd.barrier()  # no rank exits while rank 0 still writes its files
            hvd.shutdown()
            return


if __name__ == "__main__":
    main()
