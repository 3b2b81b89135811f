"""The reverse: the batches go to the GPU, the model was never moved."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
batch = torch.randn(2, 4).to("cuda")
model(batch)
