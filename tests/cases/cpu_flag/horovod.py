"""Regression on synthetic data; the GPU is opt-in with --cuda."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true", help="train on the GPU")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if args.cuda else "cpu")
    features = torch.randn(512, 8)
    targets = features.sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(features, targets)
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True),
                        pin_memory=device.type == "cuda")

    model = Regressor(args.width).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        total = hvd.allreduce(torch.tensor(total), op=hvd.Average).item()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: {total / len(loader):.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "regressor.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
