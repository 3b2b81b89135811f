import copy

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
    model = Net().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    eval_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        eval_model.load_state_dict(model.state_dict())
        eval_model.eval()
        with torch.no_grad():
            correct = 0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                correct += (eval_model(x).argmax(1) == y).sum().item()
        if hvd.rank() == 0:
            print(epoch, correct)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
