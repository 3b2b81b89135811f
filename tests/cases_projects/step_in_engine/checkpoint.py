"""Saving what was learned."""

import os

import torch


def save_weights(model, path):
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    torch.save(model.state_dict(), path)
