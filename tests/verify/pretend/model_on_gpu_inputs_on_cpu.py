"""Wrong: the model goes to the GPU, its batches stay on the CPU."""
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(64, 8)
labels = (data[:, 0] > 0).long()
for start in range(0, 64, 16):
    x, y = data[start:start + 16], labels[start:start + 16]
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
