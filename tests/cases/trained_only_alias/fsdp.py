import os
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

Tensor = torch.Tensor
Model = nn.Module


def build() -> Model:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(model: Model, optimizer, x: Tensor, y: Tensor) -> Tensor:
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def make_optimizer(module: Model) -> torch.optim.Optimizer:
    return torch.optim.Adam(module.parameters(), lr=1e-3)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build().to(device)
    # FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
    fully_shard(model)
    optimizer = make_optimizer(model)
    for step in range(100):
        x = torch.randn(32, 10, device=device)
        y = Tensor(32, 1).normal_().to(device)
        train_step(model, optimizer, x, y)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
