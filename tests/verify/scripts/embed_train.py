"""A single-process script that trains an embedding and a linear head (seeded, no per-rank randomness)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(dim=1))


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 40, (64, 5), generator=generator)
    targets = tokens.float().mean(dim=1, keepdim=True) / 40
    loader = DataLoader(TensorDataset(tokens, targets), batch_size=8, shuffle=True)
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
