"""Accumulation as an inner loop of backwards, then one step: the step is not in the backward's
block, so the engine's step-after-every-backward cannot follow it without rewriting the loop."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

ACCUM = 4


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = nn.Linear(4, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    train_dataset = TensorDataset(torch.randn(256, 4), torch.randn(256, 2))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    batches = iter(loader)
    for step in range(8):
        optimizer.zero_grad()
        for _ in range(ACCUM):
            x, y = next(batches)
            loss = nn.functional.mse_loss(model(x), y) / ACCUM
            loss.backward()
            optimizer.synchronize()  # this backward reached model: finish its all-reduces before the next one
        optimizer.step()
        if hvd.rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
