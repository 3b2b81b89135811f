import argparse

import torch
import torch.nn as nn
import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# everything fits in memory, so skip the DataLoader entirely
n = 20000
x_train = torch.randn(n, 10)
true_w = torch.randn(10, 1)
y_train = x_train @ true_w + 0.1 * torch.randn(n, 1)
x_train, y_train = x_train.to(device), y_train.to(device)

model = nn.Linear(10, 1).to(device)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
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

    if epoch % 5 == 0 and hvd.rank() == 0:
        print(f"epoch {epoch}: mse {epoch_loss / n:.6f}")

if hvd.rank() == 0:
    print("learned weights error:", (model.weight.detach().cpu().T - true_w).abs().max().item())
    torch.save(model.state_dict(), "linreg.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
