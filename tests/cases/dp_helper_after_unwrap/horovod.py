"""Segments images with a small DeepLab-like net. Under CUDA it wraps the net in nn.DataParallel,
patches the wrapper's replication (a helper that asserts it is handed nn.DataParallel) and loads
a checkpoint through `model.module`; without CUDA it loads into the bare net."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class TinyDeepLab(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


def patch_replication_callback(data_parallel):
    """Hooks each replica's BatchNorm to the master copy (synchronized BatchNorm)."""
    assert isinstance(data_parallel, nn.DataParallel)
    old_replicate = data_parallel.replicate

    def new_replicate(module, device_ids):
        return old_replicate(module, device_ids)

    data_parallel.replicate = new_replicate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume", default="")
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(0)
    images = torch.randn(32, 3, 16, 16)
    masks = torch.randint(0, 3, (32, 16, 16))
    train_dataset = TensorDataset(images, masks)
    loader = DataLoader(train_dataset, batch_size=4, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = TinyDeepLab()
    if args.cuda:
        model = model.to(device)
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        if args.cuda:
            model.load_state_dict({key.removeprefix("module."): value for key, value in checkpoint["state_dict"].items()})
        else:
            model.load_state_dict({key.removeprefix("module."): value for key, value in checkpoint["state_dict"].items()})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch, target in loader:
            if args.cuda:
                batch, target = batch.to(device), target.to(device)
            loss = nn.functional.cross_entropy(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if args.cuda:
        weights = model.state_dict()
    else:
        weights = model.state_dict()
    if hvd.rank() == 0:
        torch.save({"state_dict": weights}, "deeplab.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
