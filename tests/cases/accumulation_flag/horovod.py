"""Gradient accumulation whose update test is kept in a variable, and whose forward runs in a helper."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def batch_loss(model, features, labels):
    return nn.functional.cross_entropy(model(features), labels)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    data = TensorDataset(torch.randn(330, 16), torch.randint(0, 5, (330,)))
    loader = DataLoader(data, batch_size=10, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4 * hvd.size())
    accumulation_steps = 4
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), backward_passes_per_step=accumulation_steps)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for index, (features, labels) in enumerate(loader):
            loss = batch_loss(model, features, labels) / accumulation_steps
            loss.backward()
            update_now = (index + 1) % accumulation_steps == 0 or index + 1 == len(loader)
            if update_now:
                optimizer.step()
                optimizer.zero_grad()
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "accumulated.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
