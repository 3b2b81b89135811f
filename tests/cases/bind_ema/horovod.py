import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    ema = Net().to(device)
    model = Net().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    ema.load_state_dict(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for pe, pm in zip(ema.parameters(), model.parameters()):
                    pe.mul_(0.9).add_(pm, alpha=0.1)
        with torch.no_grad():
            x, y = next(iter(loader))
            if hvd.rank() == 0:
                print(epoch, (ema(x.to(device)).argmax(1) == y.to(device)).float().mean().item())
        if hvd.rank() == 0:
            torch.save(ema.state_dict(), "ema.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
