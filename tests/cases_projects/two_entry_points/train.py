"""Trains a regressor from scratch."""

import torch

import engine
from utils import toy_batches

model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
engine.fit(model, toy_batches(), optimizer, epochs=5)
torch.save(model.state_dict(), "regressor.pt")
