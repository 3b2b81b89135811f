"""A language model whose forward returns the loss too, evaluated by a helper that reads it."""
import os
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

use_gpu = torch.cuda.is_available()
device = torch.device("cuda" if use_gpu else "cpu")
VOCAB, BLOCK, BATCH = 32, 8, 16
data = torch.randint(0, VOCAB, (2048,))


def batch():
    starts = torch.randint(0, len(data) - BLOCK - 1, (BATCH,))
    x = torch.stack([data[s:s + BLOCK] for s in starts])
    y = torch.stack([data[s + 1:s + BLOCK + 1] for s in starts])
    return x.to(device), y.to(device)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, idx, targets=None):
        logits = self.head(self.embed(idx))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


@torch.no_grad()
def estimate_loss(model):
    model.eval()
    x, y = batch()
    _, loss = model(x, y)
    model.train()
    return loss.item()


model = TinyLM().to(device)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(200):
    x, y = batch()
    logits, loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        message = f"step {step}: train {loss.item():.3f} eval {estimate_loss(model):.3f}"  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print(message)
model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
if dist.get_rank() == 0:
    torch.save(model_state, "tiny_lm.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
