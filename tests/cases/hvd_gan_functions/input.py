"""A small GAN whose two updates are functions called in turn from the training loop: the
generator's loss runs through the discriminator, whose optimizer is stepped in the other function."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
opt_g = torch.optim.SGD(G.parameters(), lr=0.05)
opt_d = torch.optim.SGD(D.parameters(), lr=0.05)
points = TensorDataset(torch.randn(256, 2) + 2.0)
loader = DataLoader(points, batch_size=32, shuffle=True)


def critic_step(real):
    noise = torch.randn(real.size(0), 3)
    loss_d = D(G(noise).detach()).mean() - D(real).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    return loss_d.item()


def generator_step(size):
    loss_g = -D(G(torch.randn(size, 3))).mean()
    G.zero_grad()
    loss_g.backward()
    opt_g.step()
    return loss_g.item()


for epoch in range(3):
    for (real,) in loader:
        d = critic_step(real)
        g = generator_step(real.size(0))
    print(f"epoch {epoch}: D {d:.3f} G {g:.3f}")
torch.save({"G": G.state_dict(), "D": D.state_dict()}, "gan.pt")
