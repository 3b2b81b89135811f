"""Hyperparameters live in the wandb config, and the run's name picks the checkpoint folder."""
import os

import torch
import torch.nn as nn
import wandb
from torch.utils.data import DataLoader, TensorDataset


def main():
    run = wandb.init(project="sweeps-demo", config={"lr": 0.01, "batch_size": 32, "epochs": 3})
    config = wandb.config
    out_dir = os.path.join("checkpoints", run.name)

    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=config.batch_size, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    for epoch in range(config.epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        run.log({"loss": loss.item(), "epoch": epoch})
    run.summary["final_loss"] = loss.item()
    torch.save(model.state_dict(), os.path.join(out_dir, "model.pt"))
    run.finish()


if __name__ == "__main__":
    main()
