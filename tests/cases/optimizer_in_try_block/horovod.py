"""Training that can be stopped with Ctrl+C: the optimizer is built inside the same `try` as the epoch loop."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

data = TensorDataset(torch.randn(300, 7), torch.randn(300, 2))
loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
model = nn.Sequential(nn.Linear(7, 40), nn.GELU(), nn.Linear(40, 2))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

try:
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.smooth_l1_loss(model(features), targets)
            loss.backward()
            optimizer.synchronize()  # average the gradients across ranks before they are read
            if args.clip: torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            with optimizer.skip_synchronize():
                optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
except KeyboardInterrupt:
    if hvd.rank() == 0:
        print("stopped early")

if hvd.rank() == 0:
    torch.save(model.state_dict(), "model.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
