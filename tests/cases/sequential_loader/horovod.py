"""A curriculum: samples are ordered from easy to hard, so the loader must not shuffle."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    difficulty = torch.linspace(0, 1, 1024)
    x = torch.randn(1024, 8) * difficulty[:, None]
    y = x.sum(dim=1, keepdim=True)
    ordered = TensorDataset(x, y)
    loader = DataLoader(ordered, batch_size=32, sampler=DistributedSampler(ordered, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False))
    model = nn.Linear(8, 1).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(3):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "curriculum.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
