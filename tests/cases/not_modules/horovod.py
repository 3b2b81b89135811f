import argparse

import torch
import torch.nn as nn
import torchvision.transforms as transforms
from torch.utils.data import DataLoader, Dataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default="bars")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
opt = parser.parse_args()

cuda = torch.cuda.is_available()
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


class Bars(Dataset):
    """8x8 images with a bright row (label 0) or column (label 1)."""

    def __init__(self, n, size=8):
        generator = torch.Generator().manual_seed(0)
        self.labels = torch.randint(0, 2, (n,), generator=generator)
        where = torch.randint(0, size, (n,), generator=generator)
        self.images = torch.zeros(n, 1, size, size)
        for i in range(n):
            if self.labels[i] == 0:
                self.images[i, 0, where[i], :] = 1.0
            else:
                self.images[i, 0, :, where[i]] = 1.0

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Dots(Bars):
    pass


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.net(x)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if cuda else "cpu")
    augment = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.Normalize([0.5], [0.5])])
    dataset_cls = {"bars": Bars, "dots": Dots}.get(opt.dataset)
    dataset = dataset_cls(512)
    loader = DataLoader(dataset, batch_size=opt.batch_size, sampler=DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = Classifier().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=opt.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    criterion = nn.CrossEntropyLoss()

    for epoch in range(opt.epochs):
        loader.sampler.set_epoch(epoch)
        for images, labels in loader:
            images = augment(images.type(Tensor))
            images = images + Tensor(images.size()).normal_(0, 0.01)
            loss = criterion(model(images), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "classifier.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
