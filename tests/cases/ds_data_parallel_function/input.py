"""Splits each batch of two inputs over the GPUs with the functional data_parallel."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class PairScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(6, 8)
        self.right = nn.Linear(6, 8)

    def forward(self, a, b):
        return (self.left(a) * self.right(b)).sum(dim=1, keepdim=True)


parser = argparse.ArgumentParser()
parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
args = parser.parse_args()

device = torch.device("cuda" if args.gpus > 0 else "cpu")
pairs = TensorDataset(torch.randn(200, 6), torch.randn(200, 6), torch.randn(200, 1))
loader = DataLoader(pairs, batch_size=20, shuffle=True)
scorer = PairScorer().to(device)
optimizer = torch.optim.Adam(scorer.parameters(), lr=1e-3)

for epoch in range(4):
    for a, b, target in loader:
        a, b, target = a.to(device), b.to(device), target.to(device)
        score = nn.parallel.data_parallel(scorer, (a, b), list(range(args.gpus))) if args.gpus > 1 else scorer(a, b)
        loss = nn.functional.mse_loss(score, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
torch.save(scorer.state_dict(), "scorer.pt")
