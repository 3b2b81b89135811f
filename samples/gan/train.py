"""Train a small GAN whose generator learns to place 2-D points on a ring of radius 2.

Each real point is paired with a fixed latent vector stored in the dataset, so the
generator's input noise comes from the data loader instead of being drawn per step.
"""
import argparse
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

LATENT_DIM = 8
RING_RADIUS = 2.0


def make_ring_dataset(num_points, generator):
    angles = 2 * math.pi * torch.rand(num_points, generator=generator)
    radii = RING_RADIUS + 0.05 * torch.randn(num_points, generator=generator)
    points = torch.stack([radii * torch.cos(angles), radii * torch.sin(angles)], dim=1)
    noise = torch.randn(num_points, LATENT_DIM, generator=generator)
    return TensorDataset(points, noise)


class Generator(nn.Module):
    def __init__(self, latent_dim=LATENT_DIM, hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(latent_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2),
        )

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden),
            nn.LeakyReLU(0.2),
            nn.Linear(hidden, hidden),
            nn.LeakyReLU(0.2),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


def main():
    parser = argparse.ArgumentParser(description="2-D ring GAN")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write generator and discriminator weights here")
    parser.add_argument("--no-shuffle", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    g = torch.Generator().manual_seed(99)
    dataset = make_ring_dataset(256, g)
    fixed_z = torch.randn(512, LATENT_DIM, generator=g).to(device)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle)

    torch.manual_seed(args.seed)
    G = Generator().to(device)
    D = Discriminator().to(device)
    opt_g = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(0.5, 0.999))
    criterion = nn.BCEWithLogitsLoss()

    for epoch in range(1, args.epochs + 1):
        G.train()
        D.train()
        sum_d, sum_g, n = 0.0, 0.0, 0
        for real, z in loader:
            real, z = real.to(device), z.to(device)
            ones = torch.ones(real.size(0), 1, device=device)
            zeros = torch.zeros(real.size(0), 1, device=device)

            # Discriminator step: real -> 1, fake -> 0.
            fake = G(z)
            opt_d.zero_grad()
            loss_d = criterion(D(real), ones) + criterion(D(fake.detach()), zeros)
            loss_d.backward()
            opt_d.step()

            # Generator step: make D call the fakes real.
            opt_g.zero_grad()
            loss_g = criterion(D(fake), ones)
            loss_g.backward()
            opt_g.step()

            sum_d += loss_d.item()
            sum_g += loss_g.item()
            n += 1

        G.eval()
        with torch.no_grad():
            radius = G(fixed_z).norm(dim=1)
        print(
            f"epoch {epoch} loss_d {sum_d / n:.4f} loss_g {sum_g / n:.4f} "
            f"fake_radius {radius.mean().item():.3f}+-{radius.std().item():.3f} (target {RING_RADIUS})"
        )

    if args.save:
        torch.save({"generator": G.state_dict(), "discriminator": D.state_dict()}, args.save)
        print(f"saved generator and discriminator to {args.save}")


if __name__ == "__main__":
    main()
