"""Fine-tuning that trains everything for a while, then freezes the encoder from a given epoch on."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--freeze-at", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--save", default="encoder_head.pt")
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(512, 6)
    y = x[:, :3].sum(dim=1, keepdim=True) - x[:, 3:].prod(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size)
    model = EncoderHead()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(args.epochs):
        if epoch == args.freeze_at:
            for param in model.encoder.parameters():
                param.requires_grad = False
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
