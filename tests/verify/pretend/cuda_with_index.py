"""`.cuda(1)` with an explicit index: the model on the second GPU, the batch on the first."""
import torch
from torch import nn

model = nn.Linear(4, 2).cuda(1)
batch = torch.randn(3, 4).cuda()
assert next(model.parameters()).device == torch.device("cuda", 1) and batch.device == torch.device("cuda", 0)
model(batch)
