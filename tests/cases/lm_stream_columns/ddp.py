"""A word-level LSTM on one long token stream, cut into columns (the PyTorch word LM recipe)."""
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data[: nbatch * bsz]
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=16):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


class WordLM(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 32)
        self.rnn = nn.LSTM(32, 32)
        self.out = nn.Linear(32, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.out(h)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    vocab = 50
    corpus = torch.randint(0, vocab, (4096,))
    train_data = batchify(corpus, 8 * dist.get_world_size())[:, dist.get_rank()::dist.get_world_size()].contiguous()
    model = WordLM(vocab)
    model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    for epoch in range(2):
        for i in range(0, train_data.size(0) - 1, 16):
            x, y = get_batch(train_data, i)
            loss = nn.functional.cross_entropy(model(x).view(-1, vocab), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "word_lm.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
