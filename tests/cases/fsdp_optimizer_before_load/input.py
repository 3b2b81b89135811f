import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


parser = argparse.ArgumentParser()
parser.add_argument("--resume", default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(data, batch_size=32, shuffle=True)

model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
if args.resume:
    state = torch.load(args.resume)
    model.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
model = model.to(device)
best_loss = float("inf")
best_state = None

for epoch in range(args.epochs):
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    scheduler.step()
    print(f"epoch {epoch} loss {total / len(loader):.4f}")
    features = model.encoder(torch.randn(4, 8, device=device))
    print("feature norm", features.norm().item())

torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "regressor.pt")
