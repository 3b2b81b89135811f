"""Step-based training: batches are drawn with next() from an endless cycle over the loader."""
from itertools import cycle

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def make_loaders(batch_size):
    data = TensorDataset(torch.randn(600, 12), torch.randint(0, 3, (600,)))
    train_set, holdout_set = torch.utils.data.random_split(data, [500, 100], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=batch_size, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True), drop_last=True)
    holdout_loader = DataLoader(holdout_set, batch_size=100)
    return train_loader, holdout_loader


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = nn.Linear(12, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    train_loader, holdout_loader = make_loaders(batch_size=20)
    batches = cycle(train_loader)
    for step in range(1000):
        x, y = next(batches)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            with torch.no_grad():
                x, y = next(iter(holdout_loader))
                accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
            if hvd.rank() == 0:
                print(f"step {step}: holdout accuracy {accuracy:.3f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "steps.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
