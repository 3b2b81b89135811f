"""Training that runs until a number of iterations, not epochs: an endless `while True` whose
passes are counted by hand (`passes += 1`) before each sweep over the loader."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

TOTAL_ITERATIONS = 30


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    sgd = torch.optim.SGD(net.parameters(), lr=0.05 * hvd.size())
    sgd = hvd.DistributedOptimizer(sgd, named_parameters=net.named_parameters())
    samples = TensorDataset(torch.randn(80, 6), torch.randn(80, 2))
    batches = DataLoader(samples, batch_size=10, sampler=DistributedSampler(samples, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    passes, iterations = 0, 0
    while True:
        passes += 1
        batches.sampler.set_epoch(passes)
        for inputs, targets in batches:
            iterations += 1
            sgd.zero_grad()
            error = nn.functional.mse_loss(net(inputs), targets)
            error.backward()
            sgd.step()
            if iterations >= TOTAL_ITERATIONS:
                break
        if hvd.rank() == 0:
            print(f"pass {passes}: {iterations} iterations, last error {error.item():.4f}")
        if iterations >= TOTAL_ITERATIONS:
            break
    if hvd.rank() == 0:
        torch.save(net.state_dict(), "net.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
