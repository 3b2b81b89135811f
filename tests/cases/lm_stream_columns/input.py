"""A word-level LSTM on one long token stream, cut into columns (the PyTorch word LM recipe)."""

import torch
import torch.nn as nn


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
    torch.manual_seed(0)
    vocab = 50
    corpus = torch.randint(0, vocab, (4096,))
    train_data = batchify(corpus, 8)
    model = WordLM(vocab)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    for epoch in range(2):
        for i in range(0, train_data.size(0) - 1, 16):
            x, y = get_batch(train_data, i)
            loss = nn.functional.cross_entropy(model(x).view(-1, vocab), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
    torch.save(model.state_dict(), "word_lm.pt")


if __name__ == "__main__":
    main()
