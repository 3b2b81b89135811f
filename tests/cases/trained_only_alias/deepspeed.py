import json
import os
import torch
import torch.nn as nn
import deepspeed
import torch.distributed as dist

Tensor = torch.Tensor
Model = nn.Module


def build() -> Model:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(model: Model, optimizer, x: Tensor, y: Tensor) -> Tensor:
    loss = nn.functional.mse_loss(model(x), y)
    model.backward(loss)
    model.step()
    return loss


def make_optimizer(module: Model) -> torch.optim.Optimizer:
    return torch.optim.Adam(module.parameters(), lr=1e-3)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build().to(device)
    optimizer = make_optimizer(model)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for step in range(100):
        x = torch.randn(32, 10, device=device)
        y = Tensor(32, 1).normal_().to(device)
        train_step(model, optimizer, x, y)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
