import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


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

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    data = torch.rand(30000, 784)  # pretend these are flattened images
    loader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True)

    model = AutoEncoder()
    if torch.cuda.device_count() > 1:
        print(f"Using {torch.cuda.device_count()} GPUs")
        model = nn.DataParallel(model)
    model.to(device)

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.MSELoss()

    for epoch in range(args.epochs):
        epoch_loss = 0.0
        for (batch,) in loader:
            batch = batch.to(device)
            recon = model(batch)
            loss = criterion(recon, batch)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()

        print(f"epoch {epoch}: recon loss {epoch_loss / len(loader):.5f}")

    torch.save(model.module.state_dict(), "autoencoder.pt")


if __name__ == "__main__":
    main()
