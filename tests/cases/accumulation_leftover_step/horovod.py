"""Accumulation that steps on the micro-steps left over at the end of each epoch as well."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

ACCUMULATE = 4


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_dataset = TensorDataset(torch.randn(300, 10), torch.randn(300, 1))
    loader = DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), backward_passes_per_step=ACCUMULATE)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        optimizer.zero_grad()
        for step, (x, y) in enumerate(loader, start=1):
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y) / ACCUMULATE
            loss.backward()
            if step % ACCUMULATE == 0:
                optimizer.step()
                optimizer.zero_grad()
        optimizer.step()  # the batches left over after the last full window
        optimizer.zero_grad()
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "model.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
