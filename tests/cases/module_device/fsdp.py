"""Autoencoder; the device is chosen once at import time, the loop runs at the bottom of the file."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

DEVICE = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")
device_type = "cuda" if torch.cuda.is_available() else "cpu"
gpu_count = 1
data_device = "cuda" if torch.cuda.is_available() else "cpu"


def make_model():
    return nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16))


if __name__ == "__main__":
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    images = torch.rand(256, 16)
    train_dataset = TensorDataset(images)
    loader = DataLoader(train_dataset, batch_size=16 * gpu_count, sampler=DistributedSampler(train_dataset, shuffle=True),
                        pin_memory=data_device == "cuda")
    model = make_model().to(DEVICE)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            x = x.to(data_device, non_blocking=data_device == "cuda")
            with torch.autocast(device_type, enabled=device_type == "cuda"):
                loss = nn.functional.mse_loss(model(x), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {loss.item():.4f}")
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "autoencoder.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
