"""A classifier whose forward() runs its feature extractor under torch.no_grad(): only the head learns,
but the optimizer is given every parameter."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class FeatureHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 24))
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(24, 3)

    def forward(self, x):
        with torch.no_grad():
            features = self.backbone(x)
        return self.head(self.dropout(features))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    x = torch.randn(600, 12)
    y = torch.randint(0, 3, (600,))
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = FeatureHead()
    model = DDP(model, find_unused_parameters=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {loss.item():.3f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
