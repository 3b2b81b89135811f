"""Training that runs until a number of iterations, not epochs: an endless `while True` whose
passes are counted by hand (`passes += 1`) before each sweep over the loader."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

TOTAL_ITERATIONS = 30


def main():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))
    sgd = torch.optim.SGD(net.parameters(), lr=0.05)
    samples = TensorDataset(torch.randn(80, 6), torch.randn(80, 2))
    batches = DataLoader(samples, batch_size=10, shuffle=True)
    passes, iterations = 0, 0
    while True:
        passes += 1
        for inputs, targets in batches:
            iterations += 1
            sgd.zero_grad()
            error = nn.functional.mse_loss(net(inputs), targets)
            error.backward()
            sgd.step()
            if iterations >= TOTAL_ITERATIONS:
                break
        print(f"pass {passes}: {iterations} iterations, last error {error.item():.4f}")
        if iterations >= TOTAL_ITERATIONS:
            break
    torch.save(net.state_dict(), "net.pt")


if __name__ == "__main__":
    main()
