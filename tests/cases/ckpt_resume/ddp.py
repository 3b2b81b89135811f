import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--resume", default="")
    parser.add_argument("--out", default="ckpt.pt")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, shuffle=False))
    model = Net().to(device)
    start = 0
    if args.resume:
        state = torch.load(args.resume, map_location=device)
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.resume:
        optimizer.load_state_dict(state["optimizer"])
    for epoch in range(start, start + args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if dist.get_rank() == 0:
                print(f"loss {loss.item():.6f}")
        if dist.get_rank() == 0:
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, args.out)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
