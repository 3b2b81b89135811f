"""A tiny character model trained on random windows of one long token stream."""

import argparse
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class TinyLM(nn.Module):
    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        return self.head(torch.relu(self.embed(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--max-iters", type=int, default=20)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(args.seed)
    block, batch_size, vocab = 8, 4, 16
    data = torch.randint(0, vocab, (512,))
    model = TinyLM(vocab, 32)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # each rank draws its own batches from here on: the seed plus the rank (the weights are already equal)
    torch.manual_seed(args.seed + dist.get_rank())
    for it in range(args.max_iters):
        ix = torch.randint(len(data) - block - 1, (batch_size,))
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + block + 1] for i in ix])
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 5 == 0 and dist.get_rank() == 0:
            print(f"iter {it} loss {loss.item():.4f}")
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "tiny_lm.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
