import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--latent-dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=2e-4)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# "real" data: samples from a shifted 2-D gaussian
real_data = torch.randn(20000, 2) * 0.5 + torch.tensor([2.0, -1.0])
loader = DataLoader(TensorDataset(real_data), batch_size=args.batch_size, shuffle=True, drop_last=True)

generator = nn.Sequential(
    nn.Linear(args.latent_dim, 64), nn.ReLU(),
    nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
generator = nn.DataParallel(generator)  # splits each batch across the GPUs
discriminator = nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(0.2),
    nn.Linear(64, 1),
).to(device)
discriminator = nn.DataParallel(discriminator)  # splits each batch across the GPUs

opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()

for epoch in range(args.epochs):
    for (real,) in loader:
        real = real.to(device)
        ones = torch.ones(real.size(0), 1, device=device)
        zeros = torch.zeros(real.size(0), 1, device=device)

        # --- discriminator step ---
        z = torch.randn(real.size(0), args.latent_dim, device=device)
        fake = generator(z)
        d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()

        # --- generator step ---
        g_loss = bce(discriminator(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()

    print(f"epoch {epoch}: d_loss={d_loss.item():.4f} g_loss={g_loss.item():.4f}")

torch.save(generator.module.state_dict(), "generator.pt")
torch.save(discriminator.module.state_dict(), "discriminator.pt")
