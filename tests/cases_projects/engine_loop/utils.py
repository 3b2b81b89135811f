"""Small helpers shared by the scripts of this folder."""

import torch
from torch.utils.data import DataLoader, TensorDataset


class RunningMean:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def add(self, value):
        self.total += value
        self.count += 1

    def value(self):
        return self.total / max(self.count, 1)


def make_loader(samples, batch_size):
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(samples, 16, generator=generator)
    labels = torch.randint(0, 4, (samples,), generator=generator)
    return DataLoader(TensorDataset(features, labels), batch_size=batch_size, shuffle=True)


def say(line):
    print(line, flush=True)
