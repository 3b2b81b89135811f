"""Trains under nn.DataParallel and resumes from its own checkpoints, whose keys start with `module.`."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--resume", default="")
    parser.add_argument("--save", default="regressor.pt")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x.sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False))

    model = Regressor().to(device)
    if args.resume and os.path.exists(args.resume):
        model.load_state_dict({key.removeprefix("module."): value for key, value in torch.load(args.resume, map_location=device).items()})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), args.save)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
