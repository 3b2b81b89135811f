"""Starts with SGD and switches to averaged SGD once the validation loss stops improving."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    train_set = TensorDataset(torch.randn(400, 10), torch.randn(400, 1))
    valid_x, valid_y = torch.randn(100, 10), torch.randn(100, 1)
    loader = DataLoader(train_set, batch_size=25, sampler=DistributedSampler(train_set, shuffle=True))
    model = nn.Sequential(nn.Linear(10, 30), nn.ReLU(), nn.Linear(30, 1))
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    for epoch in range(20):
        loader.sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            history.append(nn.functional.mse_loss(model(valid_x), valid_y).item())
        if len(history) > 5 and history[-1] > min(history[:-5]) and not isinstance(optimizer, torch.optim.ASGD):
            optimizer = torch.optim.ASGD(model.parameters(), lr=0.1, t0=0, lambd=0.0)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
