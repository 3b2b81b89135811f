"""Spreads each batch over `--ngpu` GPUs with the functional form of DataParallel."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--ngpu", type=int, default=1, help="GPUs to spread each batch over")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() and args.ngpu > 0 else "cpu")
    images = torch.randn(512, 1, 8, 8)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    train_dataset = TensorDataset(images, labels)
    loader = DataLoader(train_dataset, batch_size=64, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 2)).to(device)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch, target in loader:
            batch, target = batch.to(device), target.to(device)
            if device.type == "cuda" and args.ngpu > 1:
                output = model(batch)
            else:
                output = model(batch)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
