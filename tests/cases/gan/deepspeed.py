import argparse
import copy
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--latent-dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

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
discriminator = nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(0.2),
    nn.Linear(64, 1),
).to(device)

opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.999))

# DeepSpeed reads its settings from ds_config.json; the values this script computes itself
# overwrite the file's, so the two never disagree
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
# one engine per model and its own optimizer, each with its own copy of the settings
generator, opt_g, _, _ = deepspeed.initialize(model=generator, optimizer=opt_g, config=copy.deepcopy(ds_config))
discriminator, opt_d, _, _ = deepspeed.initialize(model=discriminator, optimizer=opt_d, config=copy.deepcopy(ds_config))
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
        discriminator.backward(d_loss)
        discriminator.step()

        # --- generator step ---
        # generator's backward must not reach discriminator's engine: discriminator runs as its
        # plain module here, and its weights take no gradient (the original clears them before
        # discriminator's next step anyway)
        discriminator.module.requires_grad_(False)
        g_loss = bce(discriminator.module(fake), ones)
        generator.backward(g_loss)
        discriminator.module.requires_grad_(True)
        generator.step()

    if dist.get_rank() == 0:
        print(f"epoch {epoch}: d_loss={d_loss.item():.4f} g_loss={g_loss.item():.4f}")

with deepspeed.zero.GatheredParameters(list(generator.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    generator_state = {name: tensor.detach().cpu().clone() for name, tensor in generator.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save(generator_state, "generator.pt")
with deepspeed.zero.GatheredParameters(list(discriminator.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    discriminator_state = {name: tensor.detach().cpu().clone() for name, tensor in discriminator.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save(discriminator_state, "discriminator.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
