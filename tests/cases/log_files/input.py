"""Plain-text logs: a CSV appended every epoch, loss curves rewritten whole, predictions dumped."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(200, 5), torch.randn(200, 1))
    loader = DataLoader(data, batch_size=20, shuffle=True)
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    log = open("train_log.csv", "w")
    log.write("epoch,loss\n")
    losses = []
    for epoch in range(4):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
        log.write(f"{epoch},{loss.item():.5f}\n")
        log.flush()

        f = open("losses.txt", "w")
        f.write(str(losses))
        f.close()
    log.close()

    with open("predictions.txt", mode="w") as out:
        for x, _ in loader:
            out.write(f"{model(x).mean().item():.4f}\n")


if __name__ == "__main__":
    main()
