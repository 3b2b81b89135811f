"""A small GAN that switches the critic's gradients off while the generator learns, and on again
for the critic's own step, in the training loop itself."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    points = torch.randn(1024, 2) * torch.tensor([1.0, 0.3])
    train_dataset = TensorDataset(points)
    loader = DataLoader(train_dataset, batch_size=64, sampler=DistributedSampler(train_dataset, shuffle=True))
    generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    generator = DDP(generator)
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    critic = DDP(critic)
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
    opt_c = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.9))

    for epoch in range(10):
        loader.sampler.set_epoch(epoch)
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
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: critic {critic_loss.item():.3f} generator {generator_loss.item():.3f}")

    if dist.get_rank() == 0:
        torch.save({"generator": generator.module.state_dict(), "critic": critic.module.state_dict()}, "gan.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
