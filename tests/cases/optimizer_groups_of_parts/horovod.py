"""An encoder trained more gently than the head on top of it: the optimizer's two parameter groups
are the model's own parts (`model.encoder`, `model.head`), while the loop calls the whole model."""
import itertools

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(5, 10), nn.ReLU())
        self.head = nn.Linear(10, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    model = Regressor()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(
        [{"params": model.encoder.parameters(), "lr": 1e-4 * hvd.size()}, {"params": model.head.parameters()}],
        lr=1e-3 * hvd.size(),
    )
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=itertools.chain(model.encoder.named_parameters(prefix="model.encoder"), model.head.named_parameters(prefix="model.head")))
    rows = TensorDataset(torch.randn(60, 5), torch.randn(60, 1))
    loader = DataLoader(rows, batch_size=6, sampler=DistributedSampler(rows, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} done")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "regressor.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
