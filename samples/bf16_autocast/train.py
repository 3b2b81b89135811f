"""Classify points of three interleaved spirals with a LayerNorm MLP, in bfloat16 mixed precision
with --bf16.

With --bf16 the forward pass and the loss run under
`torch.autocast(device_type=device.type, dtype=torch.bfloat16)` on whatever device trains, the
CPU included; the weights and the optimizer stay float32, and no GradScaler is needed (bfloat16
has float32's range). Without it the script trains in plain float32.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 3
NUM_TRAIN = 256


def make_spirals(num_samples, generator):
    """Points on NUM_CLASSES spiral arms (one class each), with a little noise."""
    labels = torch.arange(num_samples) % NUM_CLASSES
    radius = torch.rand(num_samples, generator=generator)
    angle = 4.0 * radius + labels * (2.0 * math.pi / NUM_CLASSES)
    angle = angle + 0.2 * torch.randn(num_samples, generator=generator)
    points = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
    return TensorDataset(points, labels)


class SpiralNet(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.stem = nn.Linear(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.hidden = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, NUM_CLASSES)

    def forward(self, x):
        h = F.gelu(self.norm(self.stem(x)))
        h = h + F.gelu(self.hidden(h))
        return self.head(h)


def main():
    parser = argparse.ArgumentParser(description="Spiral classification, optionally in bfloat16 autocast")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write the final state_dict here")
    parser.add_argument("--no-shuffle", action="store_true")
    parser.add_argument("--bf16", action="store_true", help="forward pass and loss in bfloat16 autocast")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    dataset = make_spirals(NUM_TRAIN, torch.Generator().manual_seed(2024))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle)

    torch.manual_seed(args.seed)
    model = SpiralNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    for epoch in range(1, args.epochs + 1):
        model.train()
        total_loss, correct, seen = 0.0, 0, 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(y)
            correct += (logits.argmax(dim=1) == y).sum().item()
            seen += len(y)
        print(f"epoch {epoch} train_loss {total_loss / seen:.4f} train_acc {correct / seen:.3f}")

    if args.save:
        torch.save(model.state_dict(), args.save)
        print(f"saved model to {args.save}")


if __name__ == "__main__":
    main()
