"""Gradient accumulation whose update test is kept in a variable, and whose forward runs in a helper."""
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


def batch_loss(model, features, labels):
    return nn.functional.cross_entropy(model(features), labels)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    data = TensorDataset(torch.randn(330, 16), torch.randint(0, 5, (330,)))
    loader = DataLoader(data, batch_size=10, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    accumulation_steps = 4
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for index, (features, labels) in enumerate(loader):
            loss = batch_loss(model, features, labels) / accumulation_steps
            # the engine steps the optimizer when the script's own test holds (its own count runs on across epochs)
            model.set_gradient_accumulation_boundary((index + 1) % accumulation_steps == 0 or index + 1 == len(loader))
            model.backward(loss, scale_wrt_gas=False)
            model.step()
            update_now = (index + 1) % accumulation_steps == 0 or index + 1 == len(loader)
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "accumulated.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
