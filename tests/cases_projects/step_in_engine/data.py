"""A fixed classification problem, in the order it was made."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader(batch_size):
    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(192, 12, generator=generator)
    labels = (inputs[:, :3].argmax(dim=1)).long()
    return DataLoader(TensorDataset(inputs, labels), batch_size=batch_size, shuffle=False)
