"""A small GAN whose two updates are functions called in turn from the training loop: the
generator's loss runs through the discriminator, whose optimizer is stepped in the other function."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
hvd.broadcast_parameters(G.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
D = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
hvd.broadcast_parameters(D.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
opt_g = torch.optim.SGD(G.parameters(), lr=0.05 * hvd.size())
opt_g = hvd.DistributedOptimizer(opt_g, named_parameters=G.named_parameters(prefix="G"))
opt_d = torch.optim.SGD(D.parameters(), lr=0.05 * hvd.size())
opt_d = hvd.DistributedOptimizer(opt_d, named_parameters=D.named_parameters(prefix="D"))
points = TensorDataset(torch.randn(256, 2) + 2.0)
loader = DataLoader(points, batch_size=32, sampler=DistributedSampler(points, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))


def critic_step(real):
    noise = torch.randn(real.size(0), 3)
    loss_d = D(G(noise).detach()).mean() - D(real).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    return loss_d.item()


def generator_step(size):
    loss_g = -D(G(torch.randn(size, 3))).mean()
    G.zero_grad()
    loss_g.backward()
    opt_d.synchronize()  # this backward reached D: finish its all-reduces before the next one
    opt_g.step()
    return loss_g.item()


for epoch in range(3):
    loader.sampler.set_epoch(epoch)
    for (real,) in loader:
        d = critic_step(real)
        g = generator_step(real.size(0))
    if hvd.rank() == 0:
        print(f"epoch {epoch}: D {d:.3f} G {g:.3f}")
if hvd.rank() == 0:
    torch.save({"G": G.state_dict(), "D": D.state_dict()}, "gan.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
