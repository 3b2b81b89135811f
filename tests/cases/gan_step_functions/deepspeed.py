"""A GAN whose two updates are functions reading the module-level networks and optimizers."""
import argparse
import copy
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--z-dim", type=int, default=8)
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="gloo")

G = nn.Sequential(nn.Linear(args.z_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2))
D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
G_optimizer = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
D_optimizer = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))

# DeepSpeed reads its settings from ds_config.json; the values this script computes itself
# overwrite the file's, so the two never disagree
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
# one engine per model and its own optimizer, each with its own copy of the settings
D, D_optimizer, _, _ = deepspeed.initialize(model=D, optimizer=D_optimizer, config=copy.deepcopy(ds_config))
G, G_optimizer, _, _ = deepspeed.initialize(model=G, optimizer=G_optimizer, config=copy.deepcopy(ds_config))
adversarial = nn.BCEWithLogitsLoss()


def train_G():
    G.train()
    D.train()
    z = torch.randn(args.batch_size, args.z_dim)
    # G's backward must not reach D's engine: D runs as its plain module here, and its weights
    # take no gradient (the original clears them before D's next step anyway)
    D.module.requires_grad_(False)
    logit = D.module(G(z))
    G_loss = adversarial(logit, torch.ones_like(logit))
    G.backward(G_loss)
    D.module.requires_grad_(True)
    G.step()
    return G_loss.item()


def train_D(x_real):
    z = torch.randn(x_real.size(0), args.z_dim)
    x_fake = G(z).detach()
    real_logit = D(x_real)
    fake_logit = D(x_fake)
    D_loss = adversarial(real_logit, torch.ones_like(real_logit)) + adversarial(fake_logit, torch.zeros_like(fake_logit))
    D.backward(D_loss)
    D.step()
    return D_loss.item()


data = TensorDataset(torch.randn(4096, 2) * 0.3 + 1.0)
loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, shuffle=True), drop_last=True)
for epoch in range(args.epochs):
    loader.sampler.set_epoch(epoch)
    for (x_real,) in loader:
        d_loss = train_D(x_real)
        g_loss = train_G()
    if dist.get_rank() == 0:
        print(f"epoch {epoch} D {d_loss:.3f} G {g_loss:.3f}")

with deepspeed.zero.GatheredParameters(list(D.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    D_state = {name: tensor.detach().cpu().clone() for name, tensor in D.module.state_dict().items()}
with deepspeed.zero.GatheredParameters(list(G.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    G_state = {name: tensor.detach().cpu().clone() for name, tensor in G.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save({"G": G_state, "D": D_state}, "gan.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
