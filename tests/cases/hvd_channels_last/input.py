"""A small conv net trained in channels_last memory format."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    images = torch.randn(64, 3, 8, 8)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        for x, y in loader:
            x = x.to(memory_format=torch.channels_last)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
