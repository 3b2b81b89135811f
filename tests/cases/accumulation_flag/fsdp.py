"""Gradient accumulation whose update test is kept in a variable, and whose forward runs in a helper."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def batch_loss(model, features, labels):
    return nn.functional.cross_entropy(model(features), labels)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    data = TensorDataset(torch.randn(330, 16), torch.randint(0, 5, (330,)))
    loader = DataLoader(data, batch_size=10, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    accumulation_steps = 4
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for index, (features, labels) in enumerate(loader):
            model.set_requires_gradient_sync((index + 1) % accumulation_steps == 0 or index + 1 == len(loader))  # reduce gradients only on the micro-step that steps
            loss = batch_loss(model, features, labels) / accumulation_steps
            loss.backward()
            update_now = (index + 1) % accumulation_steps == 0 or index + 1 == len(loader)
            if update_now:
                optimizer.step()
                optimizer.zero_grad()
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "accumulated.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
