"""A small language model compiled first, then placed and cast to bfloat16, as some GPT scripts do."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


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

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    tokens = torch.randint(0, 16, (512, 8))
    loader = DataLoader(TensorDataset(tokens, (tokens + 1) % 16), batch_size=args.batch_size)

    model = TinyLM()
    model = torch.compile(model, backend="eager")  # "eager": no C++ compiler needed on the CPU
    model.to(device).to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
