"""Classifier trained for a number of steps from an endless stream of shuffled batches."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def infinite(loader):
    while True:
        for batch in loader:
            yield batch


def evaluate(model, dataset):
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(dataset)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    train_set = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
    held_out = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = infinite(DataLoader(train_set, 16, sampler=DistributedSampler(train_set, shuffle=True)))
    for step in range(200):
        x, y = next(batches)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            message = f"step {step} loss {loss.item():.3f} accuracy {evaluate(model, held_out):.3f}"  # computed on every rank: it may run the model
            if dist.get_rank() == 0:
                print(message)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
