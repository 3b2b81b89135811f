import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs = torch.randn(4096, 16)
    targets = inputs.sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(inputs, targets)
    loader = DataLoader(train_dataset, batch_size=128, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = Regressor()
    start_epoch = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(state["model"])
        start_epoch = state["epoch"] + 1
        if hvd.rank() == 0:
            print(f"resumed from epoch {start_epoch}")
    model.to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(start_epoch, args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
            torch.save({"model": model.state_dict(), "epoch": epoch}, "regressor.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
