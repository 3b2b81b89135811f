"""A small language model compiled first, then placed and cast to bfloat16, as some GPT scripts do."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--save", default="tiny_lm.pt")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    tokens = torch.randint(0, 16, (512, 8))
    train_dataset = TensorDataset(tokens, (tokens + 1) % 16)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=False))

    model = TinyLM()
    model = torch.compile(model, backend="eager")  # "eager": no C++ compiler needed on the CPU
    model.to(device).to(torch.bfloat16)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), args.save)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
