"""`.numpy()` of a GPU tensor without `.cpu()` first."""
import torch

scores = torch.softmax(torch.randn(4, 3).cuda(), dim=1)
print(scores.argmax(1).numpy())
