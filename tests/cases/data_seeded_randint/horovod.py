"""A tiny character model trained on random windows of one long token stream."""

import argparse

import torch
import torch.nn as nn
import horovod.torch as hvd


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

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(args.seed)
    block, batch_size, vocab = 8, 4, 16
    data = torch.randint(0, vocab, (512,))
    model = TinyLM(vocab, 32)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    # each rank draws its own batches from here on: the seed plus the rank (the weights are already equal)
    torch.manual_seed(args.seed + hvd.rank())
    for it in range(args.max_iters):
        ix = torch.randint(len(data) - block - 1, (batch_size,))
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + block + 1] for i in ix])
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 5 == 0 and hvd.rank() == 0:
            print(f"iter {it} loss {loss.item():.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "tiny_lm.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
