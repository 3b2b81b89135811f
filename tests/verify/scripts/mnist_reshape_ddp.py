"""mnist_reshape.py converted to DDP by hand: 60000 images at batch 100 on 2 ranks leave no short batch."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms


def main() -> None:
    dist.init_process_group("gloo")
    train = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    loader = DataLoader(train, batch_size=100, sampler=DistributedSampler(train, shuffle=True))
    torch.manual_seed(0)
    model = DDP(nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x = x.reshape(100, -1)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"last loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
