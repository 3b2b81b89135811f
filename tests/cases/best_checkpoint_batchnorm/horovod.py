import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class SmallConvNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def accuracy(net, loader):
    net.eval()
    right = 0
    with torch.no_grad():
        for x, y in loader:
            right += (net(x).argmax(1) == y).sum().item()
    net.train()
    return right / len(loader.dataset)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    images, labels = torch.randn(96, 1, 8, 8), torch.randint(0, 4, (96,))
    train_dataset = TensorDataset(images[:64], labels[:64])
    train_loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    held_out = DataLoader(TensorDataset(images[64:], labels[64:]), batch_size=16)
    net = SmallConvNet()
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
    best = 0.0
    for epoch in range(3):
        train_loader.sampler.set_epoch(epoch)
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
        score = accuracy(net, held_out)
        if score > best:
            best = score
            if hvd.rank() == 0:
                torch.save(net.state_dict(), "best.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
