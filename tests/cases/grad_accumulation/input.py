import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    accum_steps = args.accum_steps  # effective batch = micro_batch_size * accum_steps

    features = torch.randn(6400, 100)
    targets = torch.randint(0, 3, (6400,))
    train_loader = DataLoader(TensorDataset(features, targets), batch_size=args.micro_batch_size, shuffle=True)

    model = nn.Sequential(
        nn.Linear(100, 256),
        nn.ReLU(),
        nn.Linear(256, 3),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        running = 0.0
        for i, (x, y) in enumerate(train_loader):
            x, y = x.to(device), y.to(device)

            loss = criterion(model(x), y)
            loss = loss / accum_steps
            loss.backward()
            running += loss.item()

            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

        print(f"epoch {epoch}: loss {running * accum_steps / len(train_loader):.4f}")

    torch.save(model.state_dict(), "accum_model.pt")


if __name__ == "__main__":
    main()
