"""embed_train.py converted to FSDP2 by hand, correctly: the optimizer is built on the sharded parameters."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(dim=1))


def main() -> None:
    dist.init_process_group("gloo")
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 40, (64, 5), generator=generator)
    targets = tokens.float().mean(dim=1, keepdim=True) / 40
    dataset = TensorDataset(tokens, targets)
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    torch.manual_seed(0)
    model = Net()
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
