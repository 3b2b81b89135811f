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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def resume(model, optimizer, path, device):
    state = torch.load(path, map_location=device)
    set_model_state_dict(model, state["model"], options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    set_optimizer_state_dict(model, optimizer, named_optimizer_state(model, optimizer, state["optimizer"]), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    return state["epoch"] + 1


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
    # FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = resume(model, optimizer, args.resume, device) if args.resume else 0
    for epoch in range(start, start + args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if dist.get_rank() == 0:
                print(f"loss {loss.item():.6f}")
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        optimizer_state = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full state
        if dist.get_rank() == 0:
            torch.save({"model": model_state, "optimizer": optimizer_state, "epoch": epoch}, args.out)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
