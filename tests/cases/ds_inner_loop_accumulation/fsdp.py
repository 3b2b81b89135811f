"""Accumulation as an inner loop of backwards, then one step: the step is not in the backward's
block, so the engine's step-after-every-backward cannot follow it without rewriting the loop."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler

ACCUM = 4


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    model = nn.Linear(4, 2)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_dataset = TensorDataset(torch.randn(256, 4), torch.randn(256, 2))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    batches = iter(loader)
    for step in range(8):
        optimizer.zero_grad()
        for _ in range(ACCUM):
            x, y = next(batches)
            loss = nn.functional.mse_loss(model(x), y) / ACCUM
            loss.backward()
        optimizer.step()
        if dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
