import torch
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

def infinite(loader):
    while True:
        for batch in loader:
            yield batch

def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    ds = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    batches = infinite(loader)
    for it in range(100):
        x, y = next(batches)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "m.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()

if __name__ == "__main__":
    main()
