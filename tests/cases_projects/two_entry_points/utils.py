"""Batches of a fixed random regression problem."""

import torch


def toy_batches(seed=0, count=8, size=16):
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(8, 1, generator=generator)
    batches = []
    for _ in range(count):
        inputs = torch.randn(size, 8, generator=generator)
        batches.append((inputs, inputs @ weights))
    return batches
