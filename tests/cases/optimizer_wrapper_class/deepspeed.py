"""A transformer-style warmup schedule kept in a class that owns the optimizer and steps it."""
import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


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
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    optimizer = WarmupOptimizer(torch.optim.Adam(model.parameters(), betas=(0.9, 0.98)), 64, 100)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    # the torch optimizer inside `optimizer` goes to DeepSpeed, and DeepSpeed's optimizer takes its
    # place there: `optimizer.step_and_update_lr()` steps it (the engine's step() is not called),
    # `optimizer.zero_grad()` clears it
    model, optimizer.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer.optimizer, config=ds_config)

    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            model.backward(loss)
            optimizer.step_and_update_lr()

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "warmup.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
