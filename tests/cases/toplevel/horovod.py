import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser(description="Train a small MLP on synthetic data")
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# synthetic regression data
x = torch.randn(10000, 32)
y = x @ torch.randn(32, 1) + 0.1 * torch.randn(10000, 1)
train_dataset = TensorDataset(x, y)
train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

model = nn.Sequential(
    nn.Linear(32, 128),
    nn.ReLU(),
    nn.Linear(128, 1),
).to(device)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
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
    if hvd.rank() == 0:
        print(f"Epoch {epoch + 1}/{args.epochs} - loss: {avg_loss:.4f}")

# save the final weights
if hvd.rank() == 0:
    torch.save(model.state_dict(), "model.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
