"""A model reached under a second name: `probe = net.to(device)` is the same module, so after training
a forward through `probe` runs the sharded (or ZeRO-3 partitioned) weights like one through `net`."""
import torch
from torch import nn
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
probe = net.to(device)
hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
optimizer = torch.optim.SGD(net.parameters(), lr=0.05 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
inputs, targets = torch.randn(256, 6), torch.randn(256, 1)
train_dataset = torch.utils.data.TensorDataset(inputs, targets)
loader = torch.utils.data.DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
if hvd.rank() == 0:
    print("probe at zero:", probe(torch.zeros(1, 6, device=device)).item())
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
