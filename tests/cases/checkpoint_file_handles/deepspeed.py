"""Keeps the best model in a file written and read through open() handles."""
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

BEST = "best_model.pt"


def save_best(model, path):
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        with open(path, "wb") as handle:
            torch.save(model_state, handle)


def load_best(model, path):
    dist.barrier()  # rank 0 has finished writing path
    with open(path, "rb") as handle:
        model.module.load_state_dict(torch.load(handle, map_location=torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")))


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    best = float("inf")
    for epoch in range(5):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for features, targets in loader:
            loss = nn.functional.mse_loss(model(features), targets)
            model.backward(loss)
            model.step()
            total += loss.item()
        if total < best:
            best = total
            save_best(model, BEST)
    load_best(model, BEST)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
