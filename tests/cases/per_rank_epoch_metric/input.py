import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, loader, opt, device):
    model.train()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.mean(losses)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    best = float("inf")
    for epoch in range(6):
        mean_loss = train_epoch(model, loader, opt, device)
        scheduler.step(mean_loss)
        print(f"epoch {epoch} loss {mean_loss:.4f} lr {opt.param_groups[0]['lr']}")
        if mean_loss < best:
            torch.save(model.state_dict(), "ckpt.pt")
            best = mean_loss


if __name__ == "__main__":
    main()
