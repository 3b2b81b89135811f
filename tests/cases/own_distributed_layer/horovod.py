# The project's own distributed layer picks DDP, DeepSpeed or Horovod at run time: left unchanged
# (MIG001), since a second wrapper around it would train twice over.
import argparse

import torch
from torch import nn

from mylab import distributed_helpers

parser = argparse.ArgumentParser()
parser = distributed_helpers.add_backend_arguments(parser)
args = parser.parse_args()
backend = distributed_helpers.backend_from_args(args)
backend.initialize()

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = backend.distribute(model=model, optimizer=optimizer)
for step in range(10):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
