"""Output folders: a fresh run folder each time, a checkpoint folder kept between runs."""
import argparse
import os
import shutil
import json

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
    parser.add_argument("--run-dir", default="runs/latest")
    parser.add_argument("--ckpt-dir", default="checkpoints")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    # start from an empty run folder
    if dist.get_rank() == 0:
        if os.path.exists(args.run_dir):
            shutil.rmtree(args.run_dir)
        os.mkdir(args.run_dir)
        os.mkdir(os.path.join(args.run_dir, "samples"))
    dist.barrier()  # the other ranks wait for the directories rank 0 made

    if not os.path.exists(args.ckpt_dir):
        os.makedirs(args.ckpt_dir, exist_ok=True)
    try:
        os.makedirs("logs")
    except FileExistsError:
        pass

    dataset = TensorDataset(torch.randn(128, 4), torch.randn(128, 1))
    loader = DataLoader(dataset, batch_size=16, sampler=DistributedSampler(dataset, shuffle=True))
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.backward(loss)
            model.step()
        epoch_dir = os.path.join(args.ckpt_dir, f"epoch{epoch}")
        if not os.path.isdir(epoch_dir):
            os.makedirs(epoch_dir, exist_ok=True)
        with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
            model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
        if dist.get_rank() == 0:
            torch.save(model_state, os.path.join(epoch_dir, "model.pt"))
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
