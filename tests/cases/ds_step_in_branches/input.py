"""Two optimizer steps in the two branches of an `if` on the step's parity (a warm-up branch that
also clips): every micro-step steps, so there is no accumulation window to follow."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 2)), batch_size=8, shuffle=True)
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            if i % 2 == 0:
                optimizer.step()
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
