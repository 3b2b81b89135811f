import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    accum_steps = args.accum_steps  # effective batch = micro_batch_size * accum_steps

    features = torch.randn(6400, 100)
    targets = torch.randint(0, 3, (6400,))
    train_dataset = TensorDataset(features, targets)
    train_loader = DataLoader(train_dataset, batch_size=args.micro_batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = nn.Sequential(
        nn.Linear(100, 256),
        nn.ReLU(),
        nn.Linear(256, 3),
    ).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), backward_passes_per_step=accum_steps)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        optimizer.synchronize()  # micro-steps left over from the last window: finish their all-reduces
        optimizer.zero_grad()
        running = 0.0
        for i, (x, y) in enumerate(train_loader):
            x, y = x.to(device), y.to(device)

            loss = criterion(model(x), y)
            loss = loss / accum_steps
            loss.backward()
            running += loss.item()

            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        # the epoch's figures over every rank's batches, not only this rank's share
        running = hvd.allreduce(torch.tensor(running), op=hvd.Average).item()

        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {running * accum_steps / len(train_loader):.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "accum_model.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
