"""A regressor wrapped in nn.DataParallel whose helpers, nested in main(), read the module
through `.module`: one defined before the wrap, one after it, and a lambda."""

import torch
import torch.nn as nn
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self, features, outputs):
        super().__init__()
        self.trunk = nn.Linear(features, 16)
        self.head = nn.Linear(16, outputs)
        self.outputs = outputs

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    net = Regressor(6, 3)
    samples = torch.utils.data.TensorDataset(torch.randn(96, 6), torch.randn(96, 3))
    batches = torch.utils.data.DataLoader(samples, batch_size=12, sampler=DistributedSampler(samples, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3 * hvd.size())

    def checkpoint(path):
        if hvd.rank() == 0:
            torch.save({"weights": net.state_dict(), "outputs": net.outputs}, path)
    opt = hvd.DistributedOptimizer(opt, named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

    def report(epoch, total):
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {total:.4f} over {net.outputs} outputs")

    width = lambda: net.head.out_features
    for epoch in range(3):
        batches.sampler.set_epoch(epoch)
        total = 0.0
        for inputs, targets in batches:
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(inputs), targets)
            loss.backward()
            opt.step()
            total += loss.item()
        report(epoch, total)
        checkpoint("regressor.pt")
    if hvd.rank() == 0:
        print("head width", width())
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
