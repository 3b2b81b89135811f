"""A single-GPU script that wraps its model in nn.DataParallel anyway (as real ones do): on one
pretend GPU the wrapper runs the module directly; it asks the devices' properties first."""
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 2), device_ids=[0]).cuda()  # one GPU, as the original runs
print("dp", model(torch.randn(3, 4).cuda()).is_cuda)
