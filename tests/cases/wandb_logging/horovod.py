import argparse

import torch
import torch.nn as nn
import wandb
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--hidden", type=int, default=256)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    if hvd.rank() == 0:
        wandb.init(project="toy-regression", config=vars(args))

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # synthetic data: y = sin(x0) + cos(x1) + noise
    x = torch.rand(20000, 2) * 6 - 3
    y = (torch.sin(x[:, 0]) + torch.cos(x[:, 1])).unsqueeze(1) + 0.05 * torch.randn(20000, 1)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = nn.Sequential(
        nn.Linear(2, args.hidden), nn.Tanh(),
        nn.Linear(args.hidden, args.hidden), nn.Tanh(),
        nn.Linear(args.hidden, 1),
    ).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    step = 0
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if hvd.rank() == 0:
                wandb.log({"loss": loss.item(), "epoch": epoch}, step=step)
            step += 1

        if hvd.rank() == 0:
            print(f"epoch {epoch} done, last loss {loss.item():.5f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "regressor.pt")
        wandb.finish()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
