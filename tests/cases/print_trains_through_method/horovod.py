"""Each epoch trains through a method of the script's own class, called inside the print that
reports it: every rank must still run it (its backward all-reduces)."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Fitter:
    def __init__(self, model):
        self.model = model
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
        self.opt = hvd.DistributedOptimizer(self.opt, named_parameters=model.named_parameters())
        train_dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        self.batches = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    def one_pass(self):
        total = 0.0
        for x, y in self.batches:
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.opt.step()
            total += loss.item()
        return total


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    fitter = Fitter(nn.Linear(4, 1))
    for epoch in range(3):
        message = fitter.one_pass()  # computed on every rank: it may run a backward pass or a collective
        if hvd.rank() == 0:
            print(epoch, message)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
