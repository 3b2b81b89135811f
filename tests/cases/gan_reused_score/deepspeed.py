"""A GAN whose discriminator loss reuses the score the generator step computed."""
import torch
import torch.nn as nn

BATCH = 32
NOISE = 4

generator = nn.Sequential(nn.Linear(NOISE, 32), nn.ReLU(), nn.Linear(32, 8))
critic = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
opt_generator = torch.optim.Adam(generator.parameters(), lr=1e-4)
opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-4)

for step in range(2000):
    painted = generator(torch.randn(BATCH, NOISE))
    score_fake = critic(painted)
    generator_loss = torch.mean(torch.log(1.0 - score_fake))
    opt_generator.zero_grad()
    generator_loss.backward()
    opt_generator.step()

    score_real = critic(torch.rand(BATCH, 8))
    score_again = critic(painted.detach())
    critic_loss = -torch.mean(torch.log(score_real) + torch.log(1.0 - score_again) + torch.log(1.0 - score_fake))
    opt_critic.zero_grad()
    critic_loss.backward(retain_graph=True)
    opt_critic.step()
