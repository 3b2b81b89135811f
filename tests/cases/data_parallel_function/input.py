"""Spreads each batch over `--ngpu` GPUs with the functional form of DataParallel."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--ngpu", type=int, default=1, help="GPUs to spread each batch over")
    args = parser.parse_args()

    device = torch.device("cuda:0" if torch.cuda.is_available() and args.ngpu > 0 else "cpu")
    images = torch.randn(512, 1, 8, 8)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)

    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        for batch, target in loader:
            batch, target = batch.to(device), target.to(device)
            if device.type == "cuda" and args.ngpu > 1:
                output = nn.parallel.data_parallel(model, batch, range(args.ngpu))
            else:
                output = model(batch)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
