"""A small classifier whose epoch line prints a mean loss per batch and an accuracy over the data."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--save", type=str, default=None)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    points = torch.Generator().manual_seed(7)
    features = torch.randn(64, 6, generator=points)
    labels = (features[:, 0] + features[:, 1] > 0).long()
    train_dataset = TensorDataset(features, labels)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        total_loss = 0.0
        correct = 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            correct += (logits.argmax(dim=1) == y).sum().item()
        # the epoch's figures over every rank's batches, not only this rank's share
        total_loss = hvd.allreduce(torch.tensor(total_loss), op=hvd.Average).item()
        correct = hvd.allreduce(torch.tensor(correct), op=hvd.Sum).item()
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {total_loss / len(loader):.6f} acc {correct / len(loader.dataset):.6f}")

    if args.save and hvd.rank() == 0:
        torch.save(model.state_dict(), args.save)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
