"""final_eval.py converted to DDP by hand, correctly: the final evaluation reads through `.module`."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)


def main() -> None:
    dist.init_process_group("gloo")
    data = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=data)
    targets = inputs.sum(dim=1, keepdim=True)
    dataset = TensorDataset(inputs, targets)
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    torch.manual_seed(0)
    model = DDP(Regressor())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        first = model.module.body[0](inputs[:4])
    if dist.get_rank() == 0:
        print(f"final loss {loss.item():.4f}, first layer mean {first.mean().item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
