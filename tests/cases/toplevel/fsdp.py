import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

parser = argparse.ArgumentParser(description="Train a small MLP on synthetic data")
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# synthetic regression data
x = torch.randn(10000, 32)
y = x @ torch.randn(32, 1) + 0.1 * torch.randn(10000, 1)
train_dataset = TensorDataset(x, y)
train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

model = nn.Sequential(
    nn.Linear(32, 128),
    nn.ReLU(),
    nn.Linear(128, 1),
).to(device)
fully_shard(model)

optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
criterion = nn.MSELoss()

for epoch in range(args.epochs):
    train_loader.sampler.set_epoch(epoch)
    model.train()
    total_loss = 0.0
    for inputs, targets in train_loader:
        inputs, targets = inputs.to(device), targets.to(device)

        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

        total_loss += loss.item()

    avg_loss = total_loss / len(train_loader)
    if dist.get_rank() == 0:
        print(f"Epoch {epoch + 1}/{args.epochs} - loss: {avg_loss:.4f}")

# save the final weights
model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
if dist.get_rank() == 0:
    torch.save(model_state, "model.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
