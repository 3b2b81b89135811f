import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class AutoEncoder(nn.Module):
    def __init__(self, dim=784, bottleneck=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, bottleneck))
        self.decoder = nn.Sequential(nn.Linear(bottleneck, 256), nn.ReLU(), nn.Linear(256, dim))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    data = torch.rand(30000, 784)  # pretend these are flattened images
    train_dataset = TensorDataset(data)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = AutoEncoder()
    model.to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    criterion = nn.MSELoss()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        epoch_loss = 0.0
        for (batch,) in loader:
            batch = batch.to(device)
            recon = model(batch)
            loss = criterion(recon, batch)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        epoch_loss = hvd.allreduce(torch.tensor(epoch_loss), op=hvd.Average).item()

        if hvd.rank() == 0:
            print(f"epoch {epoch}: recon loss {epoch_loss / len(loader):.5f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "autoencoder.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
