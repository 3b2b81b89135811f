import argparse
import logging
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


def main():
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s",
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        logger.warning("CUDA not available, training on CPU will be slow")

    x = torch.randn(8000, 30)
    y = torch.randint(0, 2, (8000,))
    train_loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    logger.info("Starting training for %d epochs (%d steps/epoch)", args.epochs, len(train_loader))

    for epoch in range(args.epochs):
        total = 0.0
        for step, (inputs, labels) in enumerate(train_loader):
            inputs, labels = inputs.to(device), labels.to(device)

            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()

            if step % 100 == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())

        avg = total / len(train_loader)
        if math.isnan(avg):
            logger.warning("loss became NaN at epoch %d", epoch)
        logger.info("epoch %d finished, avg loss %.4f", epoch, avg)

    torch.save(model.state_dict(), "model.pt")
    logger.info("model saved to model.pt")


if __name__ == "__main__":
    main()
