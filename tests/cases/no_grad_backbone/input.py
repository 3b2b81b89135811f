"""A classifier whose forward() runs its feature extractor under torch.no_grad(): only the head learns,
but the optimizer is given every parameter."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class FeatureHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24))
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(24, 3)

    def forward(self, x):
        with torch.no_grad():
            features = self.backbone(x)
        return self.head(self.dropout(features))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    x = torch.randn(600, 12)
    y = torch.randint(0, 3, (600,))
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = FeatureHead()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        for features, labels in loader:
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.3f}")


if __name__ == "__main__":
    main()
