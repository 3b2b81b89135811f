"""A single-process script that reports in every way a script writes: stdout, text, numpy, PIL, a log."""

import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import writes_helper


def report(model: nn.Module, step: int) -> None:
    weight = model.weight.detach()
    sys.stdout.write(f"step {step} weight norm {weight.norm().item():.4f}\n")
    Path("summary.txt").write_text(f"step {step}\n")
    np.save("weights.npy", weight.numpy())
    Image.fromarray((weight.abs() * 255).clamp(0, 255).byte().numpy()).save("weights.png")
    writes_helper.log_line("metrics.log", f"{step} {weight.sum().item():.4f}")


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=generator)
    targets = inputs[:, :2].sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=8, shuffle=True)
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == 1:
            report(model, step)


if __name__ == "__main__":
    main()
