import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--n-critic", type=int, default=5)
    parser.add_argument("--clip", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=5e-5)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    real_data = torch.randn(2560, 2) * 0.5 + torch.tensor([1.0, -1.0])
    train_dataset = TensorDataset(real_data)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True), drop_last=True)

    generator = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    hvd.broadcast_parameters(generator.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)).to(device)
    hvd.broadcast_parameters(critic.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=args.lr * hvd.size())
    optimizer_G = hvd.DistributedOptimizer(optimizer_G, named_parameters=generator.named_parameters(prefix="generator"))
    optimizer_D = torch.optim.RMSprop(critic.parameters(), lr=args.lr * hvd.size())
    optimizer_D = hvd.DistributedOptimizer(optimizer_D, named_parameters=critic.named_parameters(prefix="critic"))

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
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
                optimizer_D.synchronize()  # this backward reached critic: finish its all-reduces before the next one
                optimizer_G.step()

        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss_D={loss_D.item():.4f} loss_G={loss_G.item():.4f}")

    if hvd.rank() == 0:
        torch.save(generator.state_dict(), "wgan_generator.pt")
        torch.save(critic.state_dict(), "wgan_critic.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
