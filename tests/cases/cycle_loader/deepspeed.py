"""Step-based training: batches are drawn with next() from an endless cycle over the loader."""
from itertools import cycle
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


def make_loaders(batch_size):
    data = TensorDataset(torch.randn(600, 12), torch.randint(0, 3, (600,)))
    train_set, holdout_set = torch.utils.data.random_split(data, [500, 100], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=batch_size, sampler=DistributedSampler(train_set, shuffle=True), drop_last=True)
    holdout_loader = DataLoader(holdout_set, batch_size=100)
    return train_loader, holdout_loader


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    model = nn.Linear(12, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    train_loader, holdout_loader = make_loaders(batch_size=20)
    batches = cycle(train_loader)
    for step in range(1000):
        x, y = next(batches)
        loss = nn.functional.cross_entropy(model(x), y)
        model.backward(loss)
        model.step()
        if step % 100 == 0:
            with torch.no_grad():
                x, y = next(iter(holdout_loader))
                accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
            if dist.get_rank() == 0:
                print(f"step {step}: holdout accuracy {accuracy:.3f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "steps.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
