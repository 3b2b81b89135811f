"""Keeps the best model in a file written and read through open() handles."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

BEST = "best_model.pt"


def save_best(model, path):
    if hvd.rank() == 0:
        with open(path, "wb") as handle:
            torch.save(model.state_dict(), handle)


def load_best(model, path):
    hvd.barrier()  # rank 0 has finished writing path
    with open(path, "rb") as handle:
        model.load_state_dict(torch.load(handle, map_location=torch.device(f"cuda:{hvd.local_rank()}" if torch.cuda.is_available() else "cpu")))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    best = float("inf")
    for epoch in range(5):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if total < best:
            best = total
            save_best(model, BEST)
    load_best(model, BEST)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
