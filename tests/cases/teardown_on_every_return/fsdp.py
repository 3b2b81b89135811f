"""Trains until a step budget is spent: the loop never ends by itself, the function returns."""

import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        total = sum(nn.functional.mse_loss(model(x), y).item() for x, y in loader)
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--test-only", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--max-epochs", type=int, default=0)
    opts = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    model = nn.Linear(8, 1)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    if opts.test_only:
        message = evaluate(model, loader)  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print("loss", message)
        dist.barrier()  # no rank exits while rank 0 still writes its files
        dist.destroy_process_group()
        return
    if opts.dry_run:
        result = evaluate(model, loader)
        dist.barrier()  # no rank exits while rank 0 still writes its files
        dist.destroy_process_group()
        return result

    def lr_at(step):
        if step < 10:
            return 0.01 * step
        return 0.1

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    epoch, step = 0, 0
    while True:
        epoch += 1
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if step >= opts.steps:
                model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
                if dist.get_rank() == 0:
                    torch.save(model_state, "last.pt")
                dist.barrier()  # no rank exits while rank 0 still writes its files
                dist.destroy_process_group()
                return
        if dist.get_rank() == 0:
            print("epoch", epoch, "done")
        if opts.max_epochs and epoch >= opts.max_epochs:
            if dist.get_rank() == 0:
                print("epoch budget spent")
            dist.barrier()  # no rank exits while rank 0 still writes its files
            dist.destroy_process_group()
            return


if __name__ == "__main__":
    main()
