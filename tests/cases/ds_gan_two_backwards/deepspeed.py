"""A small GAN whose discriminator takes two backwards (real, then fake) before its one step."""
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--no-shuffle", action="store_true")
parser.add_argument("--save", default="gan_two_backwards.pt")
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="gloo")

torch.manual_seed(0)
points = torch.randn(256, 2) * 0.3 + torch.tensor([1.5, -0.5])
noises = torch.randn(256, 4)
train_dataset = TensorDataset(points, noises)
loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=not args.no_shuffle))

netG = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
netD = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
optG = torch.optim.SGD(netG.parameters(), lr=0.05)
optD = torch.optim.SGD(netD.parameters(), lr=0.05)

# DeepSpeed reads its settings from ds_config.json; the values this script computes itself
# overwrite the file's, so the two never disagree
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
# one engine per model and its own optimizer, each with its own copy of the settings
netD, optD, _, _ = deepspeed.initialize(model=netD, optimizer=optD, config=copy.deepcopy(ds_config))
netG, optG, _, _ = deepspeed.initialize(model=netG, optimizer=optG, config=copy.deepcopy(ds_config))
criterion = nn.BCEWithLogitsLoss()

for epoch in range(args.epochs):
    loader.sampler.set_epoch(epoch)
    for real, noise in loader:
        errD_real = criterion(netD(real), torch.ones(real.size(0), 1))
        # 2 backwards feed one step: all but the last stay inside DeepSpeed's accumulation window, or ZeRO
        # 1-2 would keep only the last one's gradients
        netD.set_gradient_accumulation_boundary(False)
        netD.backward(errD_real)
        fake = netG(noise)
        errD_fake = criterion(netD(fake.detach()), torch.zeros(real.size(0), 1))
        netD.set_gradient_accumulation_boundary(True)
        netD.backward(errD_fake)
        netD.step()

        # netG's backward must not reach netD's engine: netD runs as its plain module here, and its
        # weights take no gradient (the original clears them before netD's next step anyway)
        netD.module.requires_grad_(False)
        errG = criterion(netD.module(fake), torch.ones(real.size(0), 1))
        netG.backward(errG)
        netD.module.requires_grad_(True)
        netG.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: loss_D {errD_real.item() + errD_fake.item():.4f} loss_G {errG.item():.4f}")

with deepspeed.zero.GatheredParameters(list(netD.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    netD_state = {name: tensor.detach().cpu().clone() for name, tensor in netD.module.state_dict().items()}
with deepspeed.zero.GatheredParameters(list(netG.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    netG_state = {name: tensor.detach().cpu().clone() for name, tensor in netG.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save({"generator": netG_state, "discriminator": netD_state}, args.save)
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
