"""Train a small MLP on a synthetic linear regression problem (y = xW + b + noise)."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="MLP regression on synthetic data")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--step-size", type=int, default=3, help="StepLR period in epochs")
parser.add_argument("--gamma", type=float, default=0.5)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--save", type=str, default=None, help="where to write the final state_dict")
parser.add_argument("--no-shuffle", action="store_true")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# Synthetic data comes from its own generator, so it does not depend on --seed.
IN_FEATURES, OUT_FEATURES = 10, 1
NUM_TRAIN, NUM_VAL = 256, 64
g = torch.Generator().manual_seed(1234)
true_w = torch.randn(IN_FEATURES, OUT_FEATURES, generator=g)
true_b = torch.randn(OUT_FEATURES, generator=g)
x_all = torch.randn(NUM_TRAIN + NUM_VAL, IN_FEATURES, generator=g)
y_all = x_all @ true_w + true_b + 0.1 * torch.randn(NUM_TRAIN + NUM_VAL, OUT_FEATURES, generator=g)

train_ds = TensorDataset(x_all[:NUM_TRAIN], y_all[:NUM_TRAIN])
val_ds = TensorDataset(x_all[NUM_TRAIN:], y_all[NUM_TRAIN:])
train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=not args.no_shuffle)
val_loader = DataLoader(val_ds, batch_size=args.batch_size, shuffle=False)

torch.manual_seed(args.seed)
model = nn.Sequential(
    nn.Linear(IN_FEATURES, args.hidden),
    nn.ReLU(),
    nn.Linear(args.hidden, args.hidden),
    nn.ReLU(),
    nn.Linear(args.hidden, OUT_FEATURES),
).to(device)

criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.step_size, gamma=args.gamma)

print(f"device: {device}, train samples: {len(train_ds)}, val samples: {len(val_ds)}")
for epoch in range(1, args.epochs + 1):
    model.train()
    total_loss, n_batches = 0.0, 0
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        n_batches += 1
    scheduler.step()
    print(f"epoch {epoch} train_loss {total_loss / n_batches:.4f} lr {scheduler.get_last_lr()[0]:.5f}")

    model.eval()
    val_loss, val_count = 0.0, 0
    with torch.no_grad():
        for x, y in val_loader:
            x, y = x.to(device), y.to(device)
            val_loss += criterion(model(x), y).item() * x.size(0)
            val_count += x.size(0)
    print(f"epoch {epoch} val_loss {val_loss / val_count:.4f}")

if args.save:
    torch.save(model.state_dict(), args.save)
    print(f"saved model to {args.save}")
