import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class Regressor(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs = torch.randn(4096, 16)
    targets = inputs.sum(dim=1, keepdim=True)
    train_dataset = TensorDataset(inputs, targets)
    loader = DataLoader(train_dataset, batch_size=128, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = Regressor()
    start_epoch = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(state["model"])
        start_epoch = state["epoch"] + 1
        if dist.get_rank() == 0:
            print(f"resumed from epoch {start_epoch}")
    model.to(device)
    fully_shard(model)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(start_epoch, args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        if dist.get_rank() == 0:
            torch.save({"model": model_state, "epoch": epoch}, "regressor.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
