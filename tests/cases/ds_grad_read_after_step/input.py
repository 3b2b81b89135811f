"""Logs the gradient norm of each layer after the optimizer step."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(96, 5), torch.randint(0, 3, (96,))), batch_size=12, shuffle=True)
net = nn.Sequential(nn.Linear(5, 20), nn.ReLU(), nn.Linear(20, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

for epoch in range(2):
    for inputs, labels in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(inputs), labels)
        loss.backward()
        opt.step()
    norms = {name: p.grad.norm().item() for name, p in net.named_parameters()}
    print(epoch, loss.item(), norms)
