"""manual_sgd.py converted to DDP by hand: DDP averages the gradients the hand-written update reads."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(6, 12)
        self.out = nn.Linear(12, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def main() -> None:
    dist.init_process_group("gloo")
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(96, 6, generator=generator)
    targets = (inputs[:, :1] - inputs[:, 1:2]).tanh()
    dataset = TensorDataset(inputs, targets)
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    torch.manual_seed(1)
    model = Net()
    model = DDP(model)
    rate = 0.1
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            for parameter in model.parameters():
                parameter.data -= rate * parameter.grad
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
