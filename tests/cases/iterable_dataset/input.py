"""Language-model pretraining on a token stream that is too large to index."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset

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
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    stream = TokenStream(num_blocks=10_000)
    loader = DataLoader(stream, batch_size=16)
    model = nn.Sequential(nn.Embedding(VOCAB, 64), nn.Linear(64, VOCAB)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}")
    torch.save(model.state_dict(), "lm.pt")


if __name__ == "__main__":
    main()
