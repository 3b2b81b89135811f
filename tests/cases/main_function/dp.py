import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class RandomClassificationDataset(Dataset):
    """Fake classification data so we can iterate on the training loop."""

    def __init__(self, n_samples=5000, n_features=20, n_classes=4):
        self.x = torch.randn(n_samples, n_features)
        self.y = torch.randint(0, n_classes, (n_samples,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class Classifier(nn.Module):
    def __init__(self, n_features=20, hidden=64, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(n_features, hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--out", type=str, default="classifier.pt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    dataset = RandomClassificationDataset()
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=2)

    model = Classifier().to(device)
    model = nn.DataParallel(model)  # splits each batch across the GPUs
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        running_loss = 0.0
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)

            logits = model(x)
            loss = F.cross_entropy(logits, y)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()

        print(f"epoch {epoch}: loss={running_loss / len(loader):.4f}")

    torch.save(model.module.state_dict(), args.out)


if __name__ == "__main__":
    main()
