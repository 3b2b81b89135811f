import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--latent-dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=2e-4)
args = parser.parse_args()

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# "real" data: samples from a shifted 2-D gaussian
real_data = torch.randn(20000, 2) * 0.5 + torch.tensor([2.0, -1.0])
train_dataset = TensorDataset(real_data)
loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True), drop_last=True)

generator = nn.Sequential(
    nn.Linear(args.latent_dim, 64), nn.ReLU(),
    nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
fully_shard(generator)
discriminator = nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(0.2),
    nn.Linear(64, 1),
).to(device)
fully_shard(discriminator)

opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()

for epoch in range(args.epochs):
    loader.sampler.set_epoch(epoch)
    for (real,) in loader:
        real = real.to(device)
        ones = torch.ones(real.size(0), 1, device=device)
        zeros = torch.zeros(real.size(0), 1, device=device)

        # --- discriminator step ---
        z = torch.randn(real.size(0), args.latent_dim, device=device)
        fake = generator(z)
        d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()

        # --- generator step ---
        g_loss = bce(discriminator(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()

    if dist.get_rank() == 0:
        print(f"epoch {epoch}: d_loss={d_loss.item():.4f} g_loss={g_loss.item():.4f}")

generator_state = get_model_state_dict(generator, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
discriminator_state = get_model_state_dict(discriminator, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
if dist.get_rank() == 0:
    torch.save(generator_state, "generator.pt")
    torch.save(discriminator_state, "discriminator.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
