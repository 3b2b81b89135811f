import torch
import torch.nn as nn
import horovod.torch as hvd


class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x):
        return (x - self.mean) / self.std


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))


def make_optimizer(module, lr):
    return torch.optim.SGD(module.parameters(), lr=lr * hvd.size())


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    normalize = Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]).to(device)
    model = Net().to(device)
    optimizer = make_optimizer(model, 0.1)
    optimizer = hvd.DistributedOptimizer(optimizer)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    for step in range(100):
        images = torch.rand(16, 3, 32, 32, device=device)
        labels = torch.randint(0, 10, (16,), device=device)
        loss = nn.functional.cross_entropy(model(normalize(images)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
