"""A transformer-style warmup schedule kept in a class that owns the optimizer and steps it."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class WarmupOptimizer:
    """Steps the inner optimizer and sets its learning rate from the step count."""

    def __init__(self, optimizer, model_size, warmup_steps):
        self.optimizer = optimizer
        self.model_size = model_size
        self.warmup_steps = warmup_steps
        self.steps = 0

    def step_and_update_lr(self):
        self.steps += 1
        scale = self.model_size ** -0.5 * min(self.steps ** -0.5, self.steps * self.warmup_steps ** -1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = scale
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = WarmupOptimizer(hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), betas=(0.9, 0.98)), named_parameters=model.named_parameters()), 64, 100)

    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step_and_update_lr()

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "warmup.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
