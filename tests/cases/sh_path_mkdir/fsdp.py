"""Folders made with pathlib and os on every rank."""
import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="out")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "figures").mkdir(exist_ok=True)
    os.makedirs(os.path.join(args.out, "ckpt"), exist_ok=True)
    run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    if dist.get_rank() == 0:
        run_dir.mkdir(parents=True)
    dist.barrier()  # the other ranks wait for the directory rank 0 made
    if dist.get_rank() == 0:
        try:
            os.mkdir("cache")
        except FileExistsError:
            print("cache already there")
    dist.barrier()  # the other ranks wait for the directory rank 0 made

    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=16, sampler=DistributedSampler(dataset, shuffle=True))
    model = nn.Linear(4, 1)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        if dist.get_rank() == 0:
            torch.save(model_state, run_dir / f"model{epoch}.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
