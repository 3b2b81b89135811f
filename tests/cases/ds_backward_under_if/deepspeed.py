"""Adds an auxiliary loss's backward on some steps only, before the one optimizer step."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(120, 4), torch.randn(120, 1)), batch_size=10, shuffle=True)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        out = model(x)
        main_loss = nn.functional.mse_loss(out, y)
        main_loss.backward(retain_graph=True)
        if step % 4 == 0:
            aux_loss = 0.01 * out.pow(2).mean()
            aux_loss.backward()
        optimizer.step()
    print(epoch, main_loss.item())
