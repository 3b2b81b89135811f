"""A GAN that switches the discriminator's gradients off itself during the generator's update."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def set_trainable(module, flag):
    for parameter in module.parameters():
        parameter.requires_grad = flag


def main():
    data = TensorDataset(torch.randn(2048, 3))
    loader = DataLoader(data, batch_size=128, shuffle=True)
    net_g = nn.Sequential(nn.Linear(5, 48), nn.ReLU(), nn.Linear(48, 3))
    net_d = nn.Sequential(nn.Linear(3, 48), nn.ReLU(), nn.Linear(48, 1))
    optimizer_g = torch.optim.RMSprop(net_g.parameters(), lr=5e-5)
    optimizer_d = torch.optim.RMSprop(net_d.parameters(), lr=5e-5)

    for epoch in range(20):
        for (real,) in loader:
            set_trainable(net_d, True)
            optimizer_d.zero_grad()
            fake = net_g(torch.randn(real.size(0), 5)).detach()
            d_loss = net_d(fake).mean() - net_d(real).mean()
            d_loss.backward()
            optimizer_d.step()

            set_trainable(net_d, False)
            optimizer_g.zero_grad()
            g_loss = -net_d(net_g(torch.randn(real.size(0), 5))).mean()
            g_loss.backward()
            optimizer_g.step()

    torch.save(net_g.state_dict(), "wgan_g.pt")


if __name__ == "__main__":
    main()
