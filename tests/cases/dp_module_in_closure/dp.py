"""A regressor wrapped in nn.DataParallel whose helpers, nested in main(), read the module
through `.module`: one defined before the wrap, one after it, and a lambda."""

import torch
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self, features, outputs):
        super().__init__()
        self.trunk = nn.Linear(features, 16)
        self.head = nn.Linear(16, outputs)
        self.outputs = outputs

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))


def main():
    net = Regressor(6, 3)
    samples = torch.utils.data.TensorDataset(torch.randn(96, 6), torch.randn(96, 3))
    batches = torch.utils.data.DataLoader(samples, batch_size=12, shuffle=True)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def checkpoint(path):
        torch.save({"weights": net.module.state_dict(), "outputs": net.module.outputs}, path)

    net = nn.DataParallel(net)

    def report(epoch, total):
        print(f"epoch {epoch}: loss {total:.4f} over {net.module.outputs} outputs")

    width = lambda: net.module.head.out_features
    for epoch in range(3):
        total = 0.0
        for inputs, targets in batches:
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(inputs), targets)
            loss.backward()
            opt.step()
            total += loss.item()
        report(epoch, total)
        checkpoint("regressor.pt")
    print("head width", width())


if __name__ == "__main__":
    main()
