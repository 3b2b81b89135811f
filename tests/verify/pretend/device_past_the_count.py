"""A device index past the machine's GPUs (two here)."""
import torch

weights = torch.ones(3).to("cuda:2")
