import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latent-dim", type=int, default=8)
    parser.add_argument("--n-critic", type=int, default=5)
    parser.add_argument("--clip", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=5e-5)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    real_data = torch.randn(2560, 2) * 0.5 + torch.tensor([1.0, -1.0])
    train_dataset = TensorDataset(real_data)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True), drop_last=True)

    generator = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    fully_shard(generator)
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)).to(device)
    fully_shard(critic)
    optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=args.lr)
    optimizer_D = torch.optim.RMSprop(critic.parameters(), lr=args.lr)

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
                optimizer_G.step()

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss_D={loss_D.item():.4f} loss_G={loss_G.item():.4f}")

    generator_state = get_model_state_dict(generator, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(generator_state, "wgan_generator.pt")
    critic_state = get_model_state_dict(critic, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(critic_state, "wgan_critic.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
