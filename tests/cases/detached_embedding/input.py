"""A tagger that keeps its word vectors fixed by detaching them in forward(), while the optimizer
is given every parameter."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


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

    tokens = torch.randint(0, 50, (400, 12))
    tags = tokens % 5
    loader = DataLoader(TensorDataset(tokens, tags), batch_size=20, shuffle=True)
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(args.epochs):
        for batch, target in loader:
            scores = model(batch)
            loss = nn.functional.cross_entropy(scores.reshape(-1, 5), target.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "tagger.pt")


if __name__ == "__main__":
    main()
