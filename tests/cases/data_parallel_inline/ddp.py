# nn.DataParallel wraps the constructor call itself: the model must still be built once DP goes.
import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def build(width):
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    model = build(args.width)
    model.to(device)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if dist.get_rank() == 0:
        torch.save({"state_dict": model.state_dict()}, "model.pth")  # keys keep the module. prefix of nn.DataParallel's checkpoints
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
