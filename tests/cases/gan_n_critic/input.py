import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--n-critic", type=int, default=5)
    parser.add_argument("--clip", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=5e-5)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    real_data = torch.randn(2560, 2) * 0.5 + torch.tensor([1.0, -1.0])
    loader = DataLoader(TensorDataset(real_data), batch_size=args.batch_size, shuffle=True, drop_last=True)

    generator = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)).to(device)
    optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=args.lr)
    optimizer_D = torch.optim.RMSprop(critic.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        for i, (real,) in enumerate(loader):
            real = real.to(device)

            # the critic trains on every batch
            optimizer_D.zero_grad()
            real_score = critic(real).mean()
            z = torch.randn(real.size(0), args.latent_dim, device=device)
            fake = generator(z).detach()
            loss_D = critic(fake).mean() - real_score
            loss_D.backward()
            optimizer_D.step()
            for p in critic.parameters():
                p.data.clamp_(-args.clip, args.clip)

            # the generator trains once every n_critic batches: a schedule, not accumulation
            if i % args.n_critic == 0:
                optimizer_G.zero_grad()
                loss_G = -critic(generator(z)).mean()
                loss_G.backward()
                optimizer_G.step()

        print(f"epoch {epoch}: loss_D={loss_D.item():.4f} loss_G={loss_G.item():.4f}")

    torch.save(generator.state_dict(), "wgan_generator.pt")
    torch.save(critic.state_dict(), "wgan_critic.pt")


if __name__ == "__main__":
    main()
