"""Preprocessing helpers shared by the training and eval scripts.

Nothing in here trains anything; it just turns raw arrays into tensors.
"""
import math

import torch


def normalize(x, mean=None, std=None, eps=1e-8):
    """Standardize features column-wise. Returns (x_norm, mean, std)."""
    if mean is None:
        mean = x.mean(dim=0, keepdim=True)
    if std is None:
        std = x.std(dim=0, keepdim=True)
    return (x - mean) / (std + eps), mean, std


def one_hot(labels, num_classes):
    out = torch.zeros(labels.size(0), num_classes)
    out.scatter_(1, labels.unsqueeze(1), 1.0)
    return out


def train_val_split(x, y, val_fraction=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(x.size(0), generator=g)
    n_val = int(math.ceil(x.size(0) * val_fraction))
    val_idx, train_idx = perm[:n_val], perm[n_val:]
    return (x[train_idx], y[train_idx]), (x[val_idx], y[val_idx])


def pad_sequences(seqs, pad_value=0):
    """Right-pad a list of 1-D LongTensors into a (batch, max_len) tensor."""
    max_len = max(s.size(0) for s in seqs)
    out = torch.full((len(seqs), max_len), pad_value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : s.size(0)] = s
    return out


def save_tensors(path, **tensors):
    # small helper so the scripts don't all reimplement this
    torch.save({k: v.cpu() for k, v in tensors.items()}, path)


def load_tensors(path):
    return torch.load(path, map_location="cpu")
