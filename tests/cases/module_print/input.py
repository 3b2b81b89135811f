import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from sklearn.metrics import r2_score
except ImportError:
    r2_score = None
    print("scikit-learn is not installed: R^2 is not reported (pip install scikit-learn)")

CONFIG = {"hidden": 32, "lr": 0.05, "epochs": 3}
print("config:", CONFIG)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    x = torch.randn(512, 6)
    y = x @ torch.randn(6, 1) + 0.1 * torch.randn(512, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(nn.Linear(6, CONFIG["hidden"]), nn.ReLU(), nn.Linear(CONFIG["hidden"], 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])

    for epoch in range(CONFIG["epochs"]):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    if r2_score is not None:
        with torch.no_grad():
            predicted = model(x)
        print("R^2:", r2_score(y.numpy(), predicted.numpy()))


if __name__ == "__main__":
    main()
