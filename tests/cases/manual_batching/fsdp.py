import argparse
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# everything fits in memory, so skip the DataLoader entirely
n = 20000
x_train = torch.randn(n, 10)
true_w = torch.randn(10, 1)
y_train = x_train @ true_w + 0.1 * torch.randn(n, 1)
x_train, y_train = x_train.to(device), y_train.to(device)

model = nn.Linear(10, 1).to(device)
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
loss_fn = nn.MSELoss()

for epoch in range(args.epochs):
    perm = torch.randperm(n, device=device)
    epoch_loss = 0.0
    for i in range(0, n, args.batch_size):
        idx = perm[i:i + args.batch_size]
        xb, yb = x_train[idx], y_train[idx]

        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * xb.size(0)

    if epoch % 5 == 0 and dist.get_rank() == 0:
        print(f"epoch {epoch}: mse {epoch_loss / n:.6f}")

if dist.get_rank() == 0:
    print("learned weights error:", (model.weight.detach().cpu().T - true_w).abs().max().item())
model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
if dist.get_rank() == 0:
    torch.save(model_state, "linreg.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
