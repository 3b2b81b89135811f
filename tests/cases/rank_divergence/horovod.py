import argparse
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x))


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, std=0.1)
        nn.init.zeros_(m.bias)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target-loss", type=float, default=0.05)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(512, 10)
    y = x @ torch.randn(10, 1)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = Regressor().to(device)
    model.apply(init_weights)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        if epoch == 2:
            model.head.apply(init_weights)  # restart the head halfway through
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            micro_steps = random.randint(1, 3)  # a random number of micro-steps on each batch
            done = 0
            while done < micro_steps:
                loss = nn.functional.mse_loss(model(xb), yb) / micro_steps
                loss.backward()
                optimizer.synchronize()  # this backward reached model: finish its all-reduces before the next one
                done += 1
            optimizer.step()
            if loss.item() < args.target_loss:
                break
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "regressor.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
