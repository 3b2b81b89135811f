# A print on a one-line `except:` body, next to an assignment: the body opens into a block and
# only the print moves to rank 0.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8, shuffle=True)
try: import matplotlib; CAN_PLOT = True
except ImportError: CAN_PLOT = False; print("matplotlib is missing: no plots")

for epoch in range(2):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
