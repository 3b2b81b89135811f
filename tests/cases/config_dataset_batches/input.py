"""The training loop walks the dataset itself, one sample at a time: a dataset has no batch_size,
so the DeepSpeed config cannot be overwritten from `train_set.batch_size`."""
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset


def main():
    train_set = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for x, y in train_set:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")
    torch.save(model.state_dict(), "samples.pt")


if __name__ == "__main__":
    main()
