"""Right: the model and every batch on the GPU; prints how far the weights moved."""
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
before = [p.detach().cpu().clone() for p in model.parameters()]
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
data = torch.randn(64, 8)
labels = (data[:, 0] > 0).long()
for start in range(0, 64, 16):
    x, y = data[start:start + 16].to(device), labels[start:start + 16].to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
assert next(model.parameters()).is_cuda and loss.device.type == "cuda"
moved = sum((p.detach().cpu() - b).abs().sum().item() for p, b in zip(model.parameters(), before))
print(f"device {next(model.parameters()).device} moved {moved:.4f} memory {torch.cuda.memory_allocated()}")
