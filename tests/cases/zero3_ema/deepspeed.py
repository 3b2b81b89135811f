# An exponential moving average of the weights, updated after each step from model.parameters().
# Under ZeRO-3 those are empty shards outside a forward: every rank must gather them for the update.
import argparse
import copy
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    train_dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=False))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    ema_model = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            model.backward(loss)
            model.step()
            with torch.no_grad():
                with deepspeed.zero.GatheredParameters(list(model.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                        ema_p.mul_(0.99).add_(p, alpha=0.01)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    if dist.get_rank() == 0:
        torch.save(ema_model.state_dict(), "ema.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
