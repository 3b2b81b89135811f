import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    StateDictOptions,
    set_model_state_dict,
    set_optimizer_state_dict,
    get_optimizer_state_dict,
)


def named_optimizer_state(model, optimizer, state):
    """`state` keyed by parameter names, as set_optimizer_state_dict wants it: a state dict saved
    by the single-process script numbers the parameters in the order of the optimizer's groups."""
    if not state or not any(isinstance(key, int) for key in state["state"]):
        return state
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    ordered = [names[id(parameter)] for group in optimizer.param_groups for parameter in group["params"]]
    return {
        "state": {ordered[key]: value for key, value in state["state"].items()},
        "param_groups": [{**group, "params": [ordered[key] for key in group["params"]]} for group in state["param_groups"]],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ckpt-dir", type=str, default="checkpoints")
    parser.add_argument("--resume", type=str, default="", help="path to checkpoint to resume from")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs(args.ckpt_dir, exist_ok=True)

    x = torch.randn(10000, 16)
    y = torch.randint(0, 4, (10000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    # FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device)
        set_model_state_dict(model, ckpt["model"], options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
        set_optimizer_state_dict(model, optimizer, named_optimizer_state(model, optimizer, ckpt["optimizer"]), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
        start_epoch = ckpt["epoch"] + 1
        if dist.get_rank() == 0:
            print(f"resumed from {args.resume} at epoch {start_epoch}")

    for epoch in range(start_epoch, args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

        # save a full checkpoint every epoch so we can resume
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        optimizer_state = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full state
        checkpoint = {
            "model": model_state,
            "optimizer": optimizer_state,
            "epoch": epoch,
        }
        if dist.get_rank() == 0:
            torch.save(checkpoint, os.path.join(args.ckpt_dir, f"ckpt_{epoch:03d}.pt"))
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
