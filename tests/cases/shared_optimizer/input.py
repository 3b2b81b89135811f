"""An autoencoder whose encoder and decoder are two modules trained by one optimizer."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    signals = TensorDataset(torch.randn(1024, 16))
    loader = DataLoader(signals, batch_size=args.batch_size, shuffle=True)

    encoder = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4)).to(device)
    decoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 16)).to(device)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)

    for epoch in range(args.epochs):
        for (signal,) in loader:
            signal = signal.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(decoder(encoder(signal)), signal)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} reconstruction {loss.item():.4f}")

    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, "autoencoder.pt")


if __name__ == "__main__":
    main()
