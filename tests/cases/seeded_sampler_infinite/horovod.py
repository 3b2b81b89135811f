"""Regression on a small table, read forever through a seeded sampler with replacement."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset
import horovod.torch as hvd


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    features = torch.randn(256, 8)
    targets = features.sum(dim=1, keepdim=True)
    dataset = TensorDataset(features, targets)
    g = torch.Generator()
    g.manual_seed(0 + hvd.rank())
    sampler = RandomSampler(dataset, replacement=True, num_samples=10**9, generator=g)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = nn.Linear(8, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0 and hvd.rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step == 50:
            break
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "regressor.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
