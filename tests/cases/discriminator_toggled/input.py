"""A small GAN that switches the critic's gradients off while the generator learns, and on again
for the critic's own step, in the training loop itself."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    points = torch.randn(1024, 2) * torch.tensor([1.0, 0.3])
    loader = DataLoader(TensorDataset(points), batch_size=64, shuffle=True)
    generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
    opt_c = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.9))

    for epoch in range(10):
        for (real,) in loader:
            for p in critic.parameters():
                p.requires_grad = True
            fake = generator(torch.randn(real.size(0), 4)).detach()
            critic_loss = critic(fake).mean() - critic(real).mean()
            opt_c.zero_grad()
            critic_loss.backward()
            opt_c.step()

            for p in critic.parameters():
                p.requires_grad = False
            generator_loss = -critic(generator(torch.randn(real.size(0), 4))).mean()
            opt_g.zero_grad()
            generator_loss.backward()
            opt_g.step()
        print(f"epoch {epoch}: critic {critic_loss.item():.3f} generator {generator_loss.item():.3f}")

    torch.save({"generator": generator.state_dict(), "critic": critic.state_dict()}, "gan.pt")


if __name__ == "__main__":
    main()
