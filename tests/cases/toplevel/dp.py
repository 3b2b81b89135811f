import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="Train a small MLP on synthetic data")
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# synthetic regression data
x = torch.randn(10000, 32)
y = x @ torch.randn(32, 1) + 0.1 * torch.randn(10000, 1)
train_dataset = TensorDataset(x, y)
train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True)

model = nn.Sequential(
    nn.Linear(32, 128),
    nn.ReLU(),
    nn.Linear(128, 1),
).to(device)
model = nn.DataParallel(model)  # splits each batch across the GPUs

optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
criterion = nn.MSELoss()

for epoch in range(args.epochs):
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
    print(f"Epoch {epoch + 1}/{args.epochs} - loss: {avg_loss:.4f}")

# save the final weights
torch.save(model.module.state_dict(), "model.pt")
