import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class RandomClassificationDataset(Dataset):
    """Fake classification data so we can iterate on the training loop."""

    def __init__(self, n_samples=5000, n_features=20, n_classes=4):
        self.x = torch.randn(n_samples, n_features)
        self.y = torch.randint(0, n_classes, (n_samples,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class Classifier(nn.Module):
    def __init__(self, n_features=20, hidden=64, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(n_features, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=str, default="classifier.pt")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    dataset = RandomClassificationDataset()
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True), num_workers=2)

    model = Classifier().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        running_loss = 0.0
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)

            logits = model(x)
            loss = F.cross_entropy(logits, y)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        running_loss = hvd.allreduce(torch.tensor(running_loss), op=hvd.Average).item()

        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss={running_loss / len(loader):.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), args.out)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
