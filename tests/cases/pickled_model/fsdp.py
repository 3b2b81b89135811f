# The whole model is pickled after training (moved to the CPU first): the file must hold the
# user's module, not the wrapper, or a plain process cannot unpickle it.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.to("cpu"), "model.pt")


if __name__ == "__main__":
    main()
