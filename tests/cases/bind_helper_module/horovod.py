import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from evaluate import count, evaluate
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.n_classes = n_classes
        self.fc = nn.Linear(8, n_classes)

    def forward(self, x):
        return self.fc(x)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = Net(3).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    if hvd.rank() == 0:
        print("parameters:", count(model))
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        accuracy = evaluate(model, loader, device=device)
        if hvd.rank() == 0:
            print(epoch, accuracy)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
