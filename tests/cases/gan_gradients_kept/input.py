"""A GAN that clears the discriminator's gradients right after its step, not before its backward."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    points = TensorDataset(torch.randn(1024, 2) + 3.0)
    loader = DataLoader(points, batch_size=64, shuffle=True)
    generator = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
    discriminator = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    g_optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4)
    d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
    loss_fn = nn.BCEWithLogitsLoss()

    for epoch in range(10):
        for (real,) in loader:
            fake = generator(torch.randn(real.size(0), 6))
            real_score = discriminator(real)
            fake_score = discriminator(fake.detach())
            d_loss = loss_fn(real_score, torch.ones_like(real_score)) + loss_fn(fake_score, torch.zeros_like(fake_score))
            d_loss.backward()
            d_optimizer.step()
            d_optimizer.zero_grad()

            fooled = discriminator(fake)
            g_loss = loss_fn(fooled, torch.ones_like(fooled))
            g_loss.backward()
            g_optimizer.step()
            g_optimizer.zero_grad()

    torch.save(generator.state_dict(), "generator.pt")


if __name__ == "__main__":
    main()
