"""A model reached under a second name: `probe = net.to(device)` is the same module, so after training
a forward through `probe` runs the sharded (or ZeRO-3 partitioned) weights like one through `net`."""
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
probe = net.to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
inputs, targets = torch.randn(256, 6), torch.randn(256, 1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, targets), batch_size=32, shuffle=True)
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("probe at zero:", probe(torch.zeros(1, 6, device=device)).item())
