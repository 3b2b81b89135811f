"""writes_train.py converted to DDP by hand, correctly: only rank 0 reports."""

import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import writes_helper


def report(model: nn.Module, step: int) -> None:
    weight = model.weight.detach()
    sys.stdout.write(f"step {step} weight norm {weight.norm().item():.4f}\n")
    Path("summary.txt").write_text(f"step {step}\n")
    np.save("weights.npy", weight.numpy())
    Image.fromarray((weight.abs() * 255).clamp(0, 255).byte().numpy()).save("weights.png")
    writes_helper.log_line("metrics.log", f"{step} {weight.sum().item():.4f}")


def main() -> None:
    dist.init_process_group("gloo")
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=generator)
    targets = inputs[:, :2].sum(dim=1, keepdim=True)
    dataset = TensorDataset(inputs, targets)
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == 1 and dist.get_rank() == 0:
            report(model.module, step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
