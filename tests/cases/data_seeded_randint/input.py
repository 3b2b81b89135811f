"""A tiny character model trained on random windows of one long token stream."""

import argparse

import torch
import torch.nn as nn


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

    torch.manual_seed(args.seed)
    block, batch_size, vocab = 8, 4, 16
    data = torch.randint(0, vocab, (512,))
    model = TinyLM(vocab, 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for it in range(args.max_iters):
        ix = torch.randint(len(data) - block - 1, (batch_size,))
        x = torch.stack([data[i:i + block] for i in ix])
        y = torch.stack([data[i + 1:i + block + 1] for i in ix])
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 5 == 0:
            print(f"iter {it} loss {loss.item():.4f}")
    torch.save(model.state_dict(), "tiny_lm.pt")


if __name__ == "__main__":
    main()
