"""Splits each batch of two inputs over the GPUs with the functional data_parallel."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


class PairScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(6, 8)
        self.right = nn.Linear(6, 8)

    def forward(self, a, b):
        return (self.left(a) * self.right(b)).sum(dim=1, keepdim=True)


parser = argparse.ArgumentParser()
parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if args.gpus > 0 else "cpu")
pairs = TensorDataset(torch.randn(200, 6), torch.randn(200, 6), torch.randn(200, 1))
loader = DataLoader(pairs, batch_size=20, sampler=DistributedSampler(pairs, shuffle=True))
scorer = PairScorer().to(device)
optimizer = torch.optim.Adam(scorer.parameters(), lr=1e-3)

# DeepSpeed reads its settings from ds_config.json
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
scorer, optimizer, _, _ = deepspeed.initialize(model=scorer, optimizer=optimizer, config=ds_config)

for epoch in range(4):
    loader.sampler.set_epoch(epoch)
    for a, b, target in loader:
        a, b, target = a.to(device), b.to(device), target.to(device)
        score = scorer(a, b) if args.gpus > 1 else scorer(a, b)
        loss = nn.functional.mse_loss(score, target)
        scorer.backward(loss)
        scorer.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch} loss {loss.item():.4f}")
with deepspeed.zero.GatheredParameters(list(scorer.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    scorer_state = {name: tensor.detach().cpu().clone() for name, tensor in scorer.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save(scorer_state, "scorer.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
