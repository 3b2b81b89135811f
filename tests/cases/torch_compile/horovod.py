import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class ResidualMLP(nn.Module):
    def __init__(self, dim=128, depth=4, n_classes=10):
        super().__init__()
        self.inp = nn.Linear(64, dim)
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, n_classes)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + F.gelu(block(h))
        return self.out(self.norm(h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    x = torch.randn(50000, 64)
    y = torch.randint(0, 10, (50000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True), drop_last=True)

    model = ResidualMLP().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    # compile for speed (PyTorch 2.x)
    model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        total_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)

            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        total_loss = hvd.allreduce(torch.tensor(total_loss), op=hvd.Average).item()

        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {total_loss / len(train_loader):.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "resmlp_compiled.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
