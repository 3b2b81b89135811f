"""Training that can be stopped with Ctrl+C: the optimizer is built inside the same `try` as the epoch loop."""
import argparse
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

parser = argparse.ArgumentParser()
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="gloo")

data = TensorDataset(torch.randn(300, 7), torch.randn(300, 2))
loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, shuffle=True))
model = nn.Sequential(nn.Linear(7, 40), nn.GELU(), nn.Linear(40, 2))

try:
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["gradient_clipping"] = args.clip
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            loss = nn.functional.smooth_l1_loss(model(features), targets)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
except KeyboardInterrupt:
    if dist.get_rank() == 0:
        print("stopped early")

with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save(model_state, "model.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
