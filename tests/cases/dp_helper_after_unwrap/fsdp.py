"""Segments images with a small DeepLab-like net. Under CUDA it wraps the net in nn.DataParallel,
patches the wrapper's replication (a helper that asserts it is handed nn.DataParallel) and loads
a checkpoint through `model.module`; without CUDA it loads into the bare net."""
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


class TinyDeepLab(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


def patch_replication_callback(data_parallel):
    """Hooks each replica's BatchNorm to the master copy (synchronized BatchNorm)."""
    assert isinstance(data_parallel, nn.DataParallel)
    old_replicate = data_parallel.replicate

    def new_replicate(module, device_ids):
        return old_replicate(module, device_ids)

    data_parallel.replicate = new_replicate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume", default="")
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(0)
    images = torch.randn(32, 3, 16, 16)
    masks = torch.randint(0, 3, (32, 16, 16))
    train_dataset = TensorDataset(images, masks)
    loader = DataLoader(train_dataset, batch_size=4, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = TinyDeepLab()
    if args.cuda:
        model = model.to(device)
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        if args.cuda:
            model.load_state_dict({key.removeprefix("module."): value for key, value in checkpoint["state_dict"].items()})
        else:
            model.load_state_dict({key.removeprefix("module."): value for key, value in checkpoint["state_dict"].items()})
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch, target in loader:
            if args.cuda:
                batch, target = batch.to(device), target.to(device)
            loss = nn.functional.cross_entropy(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if args.cuda:
        weights = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        model_state = {f"module.{key}": value for key, value in model_state.items()}  # the keys nn.DataParallel saved
        weights = model_state
    if dist.get_rank() == 0:
        torch.save({"state_dict": weights}, "deeplab.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
