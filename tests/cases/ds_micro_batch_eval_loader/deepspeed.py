"""Two DataLoaders called `loader`: evaluate() builds its own over the test set (batches of 1000),
and is written above the training one (batches of --batch-size), which train_epoch() iterates
under the same name. DeepSpeed's micro batch is the training loader's."""
import argparse
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


def evaluate(model, test_set):
    loader = DataLoader(test_set, batch_size=1000)
    right = 0
    with torch.no_grad():
        for inputs, labels in loader:
            right += (model(inputs).argmax(dim=1) == labels).sum().item()
    return right / len(test_set)


def train_epoch(model, loader, optimizer):
    for inputs, labels in loader:
        loss = nn.functional.cross_entropy(model(inputs), labels)
        model.backward(loss)
        model.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")
    train_set = TensorDataset(torch.randn(512, 10), torch.randint(0, 3, (512,)))
    test_set = TensorDataset(torch.randn(128, 10), torch.randint(0, 3, (128,)))
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=DistributedSampler(train_set, shuffle=True))
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        train_epoch(model, loader, optimizer)
        message = f"epoch {epoch}: accuracy {evaluate(model, test_set):.3f}"  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print(message)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
