"""Autoencoder; the device is chosen once at import time, the loop runs at the bottom of the file."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

DEVICE = torch.device("cuda", 0)
gpu_count = 1
data_device = "cuda" if torch.cuda.is_available() else "cpu"


def make_model():
    return nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16))


if __name__ == "__main__":
    images = torch.rand(256, 16)
    loader = DataLoader(TensorDataset(images), batch_size=16 * gpu_count, shuffle=True,
                        pin_memory=data_device == "cuda")
    model = make_model().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(2):
        for (x,) in loader:
            x = x.to(data_device, non_blocking=data_device == "cuda")
            loss = nn.functional.mse_loss(model(x), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")
    torch.save(model.state_dict(), "autoencoder.pt")
