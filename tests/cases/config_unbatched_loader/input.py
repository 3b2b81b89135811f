"""The dataset yields whole batches and the DataLoader takes batch_size=None: `loader.batch_size`
is None, which no DeepSpeed config can take."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset


class Batches(IterableDataset):
    def __iter__(self):
        for _ in range(50):
            yield torch.randn(16, 8), torch.randn(16, 1)


def main():
    loader = DataLoader(Batches(), batch_size=None)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "unbatched.pt")


if __name__ == "__main__":
    main()
