"""Fine-tuning that trains everything for a while, then freezes the encoder from a given epoch on."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--freeze-at", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--save", default="encoder_head.pt")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    x = torch.randn(512, 6)
    y = x[:, :3].sum(dim=1, keepdim=True) - x[:, 3:].prod(dim=1, keepdim=True)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=False))
    model = EncoderHead()
    model = DDP(model, find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(args.epochs):
        if epoch == args.freeze_at:
            for param in model.module.encoder.parameters():
                param.requires_grad = False
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
