"""Restarts Adam from scratch, at half the rate, every few epochs (a warm restart)."""
import sys
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def rebuild(model, lr):
    return hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=lr * hvd.size()), named_parameters=model.named_parameters())


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 5), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=12, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
    lr = 0.01
    optimizer = rebuild(model, lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    for epoch in range(6):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        if epoch % 2 == 1:
            lr = lr / 2
            optimizer.set_backward_passes_per_step(sys.maxsize)  # the replaced optimizer keeps its Horovod hooks: they never all-reduce again
            optimizer = rebuild(model, lr)
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "restarted.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
