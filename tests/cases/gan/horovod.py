import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--latent-dim", type=int, default=16)
parser.add_argument("--lr", type=float, default=2e-4)
args = parser.parse_args()

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# "real" data: samples from a shifted 2-D gaussian
real_data = torch.randn(20000, 2) * 0.5 + torch.tensor([2.0, -1.0])
train_dataset = TensorDataset(real_data)
loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True), drop_last=True)

generator = nn.Sequential(
    nn.Linear(args.latent_dim, 64), nn.ReLU(),
    nn.Linear(64, 64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
hvd.broadcast_parameters(generator.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
discriminator = nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(0.2),
    nn.Linear(64, 1),
).to(device)
hvd.broadcast_parameters(discriminator.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr * hvd.size(), betas=(0.5, 0.999))
opt_g = hvd.DistributedOptimizer(opt_g, named_parameters=generator.named_parameters(prefix="generator"))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr * hvd.size(), betas=(0.5, 0.999))
opt_d = hvd.DistributedOptimizer(opt_d, named_parameters=discriminator.named_parameters(prefix="discriminator"))
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
        opt_d.synchronize()  # this backward reached discriminator: finish its all-reduces before the next one
        opt_g.step()

    if hvd.rank() == 0:
        print(f"epoch {epoch}: d_loss={d_loss.item():.4f} g_loss={g_loss.item():.4f}")

if hvd.rank() == 0:
    torch.save(generator.state_dict(), "generator.pt")
    torch.save(discriminator.state_dict(), "discriminator.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
