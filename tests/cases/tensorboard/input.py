import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-dir", type=str, default="runs/exp1")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    writer = SummaryWriter(log_dir=args.log_dir)

    x = torch.randn(10000, 24)
    y = torch.randint(0, 6, (10000,))
    train_loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = nn.Sequential(nn.Linear(24, 96), nn.ReLU(), nn.Linear(96, 6)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    global_step = 0
    for epoch in range(args.epochs):
        model.train()
        correct = 0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)

            optimizer.zero_grad()
            logits = model(inputs)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()

            correct += (logits.argmax(dim=1) == labels).sum().item()
            writer.add_scalar("train/loss", loss.item(), global_step)
            global_step += 1

        acc = correct / len(train_loader.dataset)
        writer.add_scalar("train/accuracy", acc, epoch)
        print(f"epoch {epoch}: train acc {acc:.3f}")

    writer.close()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
