"""Language-model pretraining on a token stream that is too large to index."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

BLOCK = 32
VOCAB = 256


class TokenStream(IterableDataset):
    def __init__(self, num_blocks):
        self.num_blocks = num_blocks

    def __iter__(self):
        generator = torch.Generator().manual_seed(0)
        for _ in range(self.num_blocks):
            tokens = torch.randint(0, VOCAB, (BLOCK + 1,), generator=generator)
            yield tokens[:-1], tokens[1:]


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    stream = TokenStream(num_blocks=10_000)
    loader = DataLoader(stream, batch_size=16)
    model = nn.Sequential(nn.Embedding(VOCAB, 64), nn.Linear(64, VOCAB)).to(device)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.3f}")
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "lm.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
