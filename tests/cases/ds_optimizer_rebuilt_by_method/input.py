"""A trainer that restarts its optimizer with a lower rate when the loss stops falling."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, lr):
        self.model = model
        self.lr = lr
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)

    def lower_lr(self):
        self.lr = self.lr / 10
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr)

    def fit(self, loader, epochs):
        best = float("inf")
        for epoch in range(epochs):
            total = 0.0
            for x, y in loader:
                loss = nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            if total > best:
                self.lower_lr()
            best = min(best, total)
            print(f"epoch {epoch}: loss {total:.4f}")


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(128, 6), torch.randint(0, 2, (128,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
    Trainer(model, 0.1).fit(loader, 4)
    torch.save(model.state_dict(), "trained.pt")


if __name__ == "__main__":
    main()
