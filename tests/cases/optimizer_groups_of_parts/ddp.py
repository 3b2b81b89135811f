"""An encoder trained more gently than the head on top of it: the optimizer's two parameter groups
are the model's own parts (`model.encoder`, `model.head`), while the loop calls the whole model."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(5, 10), nn.ReLU())
        self.head = nn.Linear(10, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    model = Regressor()
    model = DDP(model)
    optimizer = torch.optim.Adam(
        [{"params": model.module.encoder.parameters(), "lr": 1e-4}, {"params": model.module.head.parameters()}],
        lr=1e-3,
    )
    rows = TensorDataset(torch.randn(60, 5), torch.randn(60, 1))
    loader = DataLoader(rows, batch_size=6, sampler=DistributedSampler(rows, shuffle=True))
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done")
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "regressor.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
