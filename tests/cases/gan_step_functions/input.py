"""A GAN whose two updates are functions reading the module-level networks and optimizers."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--z-dim", type=int, default=8)
args = parser.parse_args()

G = nn.Sequential(nn.Linear(args.z_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2))
D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
G_optimizer = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
D_optimizer = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
adversarial = nn.BCEWithLogitsLoss()


def train_G():
    G.train()
    D.train()
    z = torch.randn(args.batch_size, args.z_dim)
    logit = D(G(z))
    G_loss = adversarial(logit, torch.ones_like(logit))
    G.zero_grad()
    G_loss.backward()
    G_optimizer.step()
    return G_loss.item()


def train_D(x_real):
    z = torch.randn(x_real.size(0), args.z_dim)
    x_fake = G(z).detach()
    real_logit = D(x_real)
    fake_logit = D(x_fake)
    D_loss = adversarial(real_logit, torch.ones_like(real_logit)) + adversarial(fake_logit, torch.zeros_like(fake_logit))
    D.zero_grad()
    D_loss.backward()
    D_optimizer.step()
    return D_loss.item()


data = TensorDataset(torch.randn(4096, 2) * 0.3 + 1.0)
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True)
for epoch in range(args.epochs):
    for (x_real,) in loader:
        d_loss = train_D(x_real)
        g_loss = train_G()
    print(f"epoch {epoch} D {d_loss:.3f} G {g_loss:.3f}")

torch.save({"G": G.state_dict(), "D": D.state_dict()}, "gan.pt")
