"""Segments images with a small DeepLab-like net. Under CUDA it wraps the net in nn.DataParallel,
patches the wrapper's replication (a helper that asserts it is handed nn.DataParallel) and loads
a checkpoint through `model.module`; without CUDA it loads into the bare net."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


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
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(0)
    images = torch.randn(32, 3, 16, 16)
    masks = torch.randint(0, 3, (32, 16, 16))
    loader = DataLoader(TensorDataset(images, masks), batch_size=4, shuffle=True)

    model = TinyDeepLab()
    if args.cuda:
        model = torch.nn.DataParallel(model, device_ids=[0])
        patch_replication_callback(model)
        model = model.cuda()
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        if args.cuda:
            model.module.load_state_dict(checkpoint["state_dict"])
        else:
            model.load_state_dict(checkpoint["state_dict"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(args.epochs):
        for batch, target in loader:
            if args.cuda:
                batch, target = batch.cuda(), target.cuda()
            loss = nn.functional.cross_entropy(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    if args.cuda:
        weights = model.module.state_dict()
    else:
        weights = model.state_dict()
    torch.save({"state_dict": weights}, "deeplab.pt")


if __name__ == "__main__":
    main()
