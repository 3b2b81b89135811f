"""Gradient accumulation whose count is an argument of the training function, given by its caller
from the command line."""

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


def run_epochs(net, batches, opt, epochs, accum_every=1):
    for epoch in range(epochs):
        batches.sampler.set_epoch(epoch)
        for step, (inputs, targets) in enumerate(batches):
            loss = nn.functional.mse_loss(net(inputs), targets) / accum_every
            # the engine steps the optimizer when the script's own test holds (its own count runs on across epochs)
            net.set_gradient_accumulation_boundary((step + 1) % accum_every == 0)
            net.backward(loss, scale_wrt_gas=False)
            net.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-every", type=int, default=2)
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
    net = nn.Linear(6, 1)
    train_dataset = TensorDataset(torch.randn(80, 6), torch.randn(80, 1))
    batches = DataLoader(train_dataset, batch_size=10, sampler=DistributedSampler(train_dataset, shuffle=True))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["gradient_accumulation_steps"] = args.accum_every
    net, opt, _, _ = deepspeed.initialize(model=net, optimizer=opt, config=ds_config)
    run_epochs(net, batches, opt, args.epochs, accum_every=args.accum_every)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
