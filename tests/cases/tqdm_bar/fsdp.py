import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def build_loader(batch_size):
    x = torch.randn(12000, 40)
    y = (x.pow(2).sum(dim=1, keepdim=True) > 40).float()
    train_dataset = TensorDataset(x, y)
    return DataLoader(train_dataset, batch_size=batch_size, sampler=DistributedSampler(train_dataset, shuffle=True), num_workers=4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = build_loader(args.batch_size)

    model = nn.Sequential(nn.Linear(40, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.BCEWithLogitsLoss()

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        pbar = tqdm(train_loader, desc=f"Epoch {epoch + 1}/{args.epochs}", disable=dist.get_rank() != 0)
        for x, y in pbar:
            x, y = x.to(device), y.to(device)

            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()

            pbar.set_postfix(loss=f"{loss.item():.4f}")

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "model.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
