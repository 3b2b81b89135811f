"""The training step both scripts of this folder run."""

import torch


def fit(model, batches, optimizer, epochs):
    for _ in range(epochs):
        for inputs, targets in batches:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
    return model
