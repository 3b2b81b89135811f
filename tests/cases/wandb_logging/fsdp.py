import argparse
import os

import torch
import torch.nn as nn
import wandb
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--hidden", type=int, default=256)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    if dist.get_rank() == 0:
        wandb.init(project="toy-regression", config=vars(args))

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # synthetic data: y = sin(x0) + cos(x1) + noise
    x = torch.rand(20000, 2) * 6 - 3
    y = (torch.sin(x[:, 0]) + torch.cos(x[:, 1])).unsqueeze(1) + 0.05 * torch.randn(20000, 1)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(
        nn.Linear(2, args.hidden), nn.Tanh(),
        nn.Linear(args.hidden, args.hidden), nn.Tanh(),
        nn.Linear(args.hidden, 1),
    ).to(device)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if dist.get_rank() == 0:
                wandb.log({"loss": loss.item(), "epoch": epoch}, step=step)
            step += 1

        if dist.get_rank() == 0:
            print(f"epoch {epoch} done, last loss {loss.item():.5f}")

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "regressor.pt")
        wandb.finish()
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
