"""A trainer that restarts its optimizer with a lower rate when the loss stops falling."""
import sys
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, lr):
        self.model = model
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
        self.lr = lr
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr * hvd.size(), momentum=0.9)
        self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=self.model.named_parameters())

    def lower_lr(self):
        self.lr = self.lr / 10
        self.optimizer.set_backward_passes_per_step(sys.maxsize)  # the replaced optimizer keeps its Horovod hooks: they never all-reduce again
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr * hvd.size())
        self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=self.model.named_parameters())

    def fit(self, loader, epochs):
        best = float("inf")
        for epoch in range(epochs):
            loader.sampler.set_epoch(epoch)
            total = 0.0
            for x, y in loader:
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            # the epoch's figures over every rank's batches, not only this rank's share
            total = hvd.allreduce(torch.tensor(total), op=hvd.Sum).item()
            if total > best:
                self.lower_lr()
            best = min(best, total)
            if hvd.rank() == 0:
                print(f"epoch {epoch}: loss {total:.4f}")


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(128, 6), torch.randint(0, 2, (128,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    Trainer(model, 0.1).fit(loader, 4)
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "trained.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
