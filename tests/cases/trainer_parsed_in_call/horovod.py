"""A Trainer class that keeps its own device, driven by `main(parser.parse_args())`: the command
line is parsed and training starts in one statement of the __main__ block."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, args):
        self.device = torch.device(f"cuda:{hvd.local_rank()}" if torch.cuda.is_available() else "cpu")
        self.model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(self.device)
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr * hvd.size())
        self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=self.model.named_parameters())
        data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
        self.loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            for x, y in self.loader:
                x, y = x.to(self.device) if torch.cuda.is_available() else x, y.to(self.device)
                loss = nn.functional.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            if hvd.rank() == 0:
                print(f"epoch {epoch} loss {loss.item():.4f}")


def main(args):
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    Trainer(args).fit(args.epochs)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    main(parser.parse_args())
