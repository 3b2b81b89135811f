"""Mixed precision the CUDA way: autocast("cuda") and a GradScaler; trains on the pretend GPU."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(6, 3).cuda()
start = model.weight.detach().cpu().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
scaler = torch.amp.GradScaler("cuda")
for _ in range(3):
    x = torch.randn(8, 6, device="cuda")
    y = torch.randint(0, 3, (8,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
with torch.cuda.amp.autocast():
    model(torch.randn(2, 6).cuda())
print("moved", (model.weight.detach().cpu() - start).abs().sum().item())
