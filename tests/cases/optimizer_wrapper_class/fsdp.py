"""A transformer-style warmup schedule kept in a class that owns the optimizer and steps it."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class WarmupOptimizer:
    """Steps the inner optimizer and sets its learning rate from the step count."""

    def __init__(self, optimizer, model_size, warmup_steps):
        self.optimizer = optimizer
        self.model_size = model_size
        self.warmup_steps = warmup_steps
        self.steps = 0

    def step_and_update_lr(self):
        self.steps += 1
        scale = self.model_size ** -0.5 * min(self.steps ** -0.5, self.steps * self.warmup_steps ** -1.5)
        for group in self.optimizer.param_groups:
            group["lr"] = scale
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = WarmupOptimizer(torch.optim.Adam(model.parameters(), betas=(0.9, 0.98)), 64, 100)

    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step_and_update_lr()

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "warmup.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
