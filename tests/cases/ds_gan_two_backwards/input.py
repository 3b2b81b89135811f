"""A small GAN whose discriminator takes two backwards (real, then fake) before its one step."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--no-shuffle", action="store_true")
parser.add_argument("--save", default="gan_two_backwards.pt")
args = parser.parse_args()

torch.manual_seed(0)
points = torch.randn(256, 2) * 0.3 + torch.tensor([1.5, -0.5])
noises = torch.randn(256, 4)
loader = DataLoader(TensorDataset(points, noises), batch_size=args.batch_size, shuffle=not args.no_shuffle)

netG = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
netD = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
optG = torch.optim.SGD(netG.parameters(), lr=0.05)
optD = torch.optim.SGD(netD.parameters(), lr=0.05)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(args.epochs):
    for real, noise in loader:
        netD.zero_grad()
        errD_real = criterion(netD(real), torch.ones(real.size(0), 1))
        errD_real.backward()
        fake = netG(noise)
        errD_fake = criterion(netD(fake.detach()), torch.zeros(real.size(0), 1))
        errD_fake.backward()
        optD.step()

        netG.zero_grad()
        errG = criterion(netD(fake), torch.ones(real.size(0), 1))
        errG.backward()
        optG.step()
    print(f"epoch {epoch}: loss_D {errD_real.item() + errD_fake.item():.4f} loss_G {errG.item():.4f}")

torch.save({"generator": netG.state_dict(), "discriminator": netD.state_dict()}, args.save)
