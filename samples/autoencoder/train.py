"""Train an autoencoder whose encoder and decoder are separate modules sharing one optimizer.

The 32-dimensional signals lie near an 8-dimensional subspace, so a 4-dimensional code
reconstructs most of each one.
"""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

SIGNAL_DIM, SUBSPACE_DIM, CODE_DIM = 32, 8, 4


def make_signals(num_samples, generator):
    basis = torch.randn(SUBSPACE_DIM, SIGNAL_DIM, generator=generator)
    weights = torch.randn(num_samples, SUBSPACE_DIM, generator=generator)
    return weights @ basis + 0.05 * torch.randn(num_samples, SIGNAL_DIM, generator=generator)


def main():
    parser = argparse.ArgumentParser(description="encoder + decoder, one optimizer")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write encoder and decoder weights here")
    parser.add_argument("--no-shuffle", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    signals = make_signals(256, torch.Generator().manual_seed(7))
    loader = DataLoader(TensorDataset(signals), batch_size=args.batch_size, shuffle=not args.no_shuffle)

    torch.manual_seed(args.seed)
    encoder = nn.Sequential(nn.Linear(SIGNAL_DIM, 64), nn.Tanh(), nn.Linear(64, CODE_DIM)).to(device)
    decoder = nn.Sequential(nn.Linear(CODE_DIM, 64), nn.Tanh(), nn.Linear(64, SIGNAL_DIM)).to(device)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        encoder.train()
        decoder.train()
        total, batches = 0.0, 0
        for (signal,) in loader:
            signal = signal.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(decoder(encoder(signal)), signal)
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        print(f"epoch {epoch} train_loss {total / batches:.4f}")

    if args.save:
        torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, args.save)
        print(f"saved encoder and decoder to {args.save}")


if __name__ == "__main__":
    main()
