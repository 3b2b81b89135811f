"""A tagger that keeps its word vectors fixed by detaching them in forward(), while the optimizer
is given every parameter."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class Tagger(nn.Module):
    def __init__(self, vocab=50, dim=16, tags=5):
        super().__init__()
        self.words = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.tags = nn.Linear(dim, tags)

    def forward(self, tokens):
        vectors = self.words(tokens).detach()  # pretrained vectors stay as they are
        hidden, _ = self.rnn(vectors)
        return self.tags(hidden)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    tokens = torch.randint(0, 50, (400, 12))
    tags = tokens % 5
    train_dataset = TensorDataset(tokens, tags)
    loader = DataLoader(train_dataset, batch_size=20, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = Tagger()
    model = DDP(model, find_unused_parameters=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch, target in loader:
            scores = model(batch)
            loss = nn.functional.cross_entropy(scores.reshape(-1, 5), target.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "tagger.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
