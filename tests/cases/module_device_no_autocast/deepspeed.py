"""Autoencoder; the device is chosen once at import time, the loop runs at the bottom of the file."""
import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

DEVICE = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")
gpu_count = 1
data_device = "cuda" if torch.cuda.is_available() else "cpu"


def make_model():
    return nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16))


if __name__ == "__main__":
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    images = torch.rand(256, 16)
    train_dataset = TensorDataset(images)
    loader = DataLoader(train_dataset, batch_size=16 * gpu_count, sampler=DistributedSampler(train_dataset, shuffle=True),
                        pin_memory=data_device == "cuda")
    model = make_model().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters())

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = 16 * gpu_count
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            x = x.to(data_device, non_blocking=data_device == "cuda")
            loss = nn.functional.mse_loss(model(x), x)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {loss.item():.4f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "autoencoder.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
