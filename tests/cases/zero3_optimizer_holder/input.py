"""A class of the script's own owns the optimizer: it sets a warmup learning rate, then steps it."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class ScheduledStepper:
    def __init__(self, inner, warmup):
        self.inner = inner
        self.warmup = warmup
        self.count = 0

    def update(self):
        self.count += 1
        for group in self.inner.param_groups:
            group["lr"] = 2e-3 * min(1.0, self.count / self.warmup)
        self.inner.step()

    def zero_grad(self):
        self.inner.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(11)
    data = TensorDataset(torch.randn(256, 24, generator=generator), torch.randint(0, 4, (256,), generator=generator))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=False)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 4))
    stepper = ScheduledStepper(torch.optim.AdamW(model.parameters()), warmup=10)
    for epoch in range(2):
        for features, labels in loader:
            stepper.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            stepper.update()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    torch.save(model.state_dict(), "scheduled.pt")


if __name__ == "__main__":
    main()
