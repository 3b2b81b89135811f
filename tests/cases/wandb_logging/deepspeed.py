import argparse
import json
import os

import torch
import torch.nn as nn
import wandb
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

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
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    step = 0
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)

            model.backward(loss)
            model.step()

            if dist.get_rank() == 0:
                wandb.log({"loss": loss.item(), "epoch": epoch}, step=step)
            step += 1

        if dist.get_rank() == 0:
            print(f"epoch {epoch} done, last loss {loss.item():.5f}")

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "regressor.pt")
        wandb.finish()
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
