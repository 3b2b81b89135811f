import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class AutoEncoder(nn.Module):
    def __init__(self, dim=32, code=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, code))
        self.decoder = nn.Sequential(nn.Linear(code, 16), nn.ReLU(), nn.Linear(16, dim))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def feature_extractor(dim=32):
    """Stands in for a pretrained network (a VGG's first blocks) used for a perceptual loss."""
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(dim, 64), nn.Tanh(), nn.Linear(64, 64))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--perceptual-weight", type=float, default=0.1)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    data = torch.randn(640, 32)
    loader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True)
    val_x = torch.randn(64, 32).to(device)

    # a frozen network: called in every step, but no optimizer holds its parameters
    vgg = feature_extractor().to(device).eval()
    for p in vgg.parameters():
        p.requires_grad = False

    model = AutoEncoder().to(device)
    model = nn.DataParallel(model)  # splits each batch across the GPUs
    ema_model = copy.deepcopy(model.module).eval().requires_grad_(False)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        model.train()
        for (x,) in loader:
            x = x.to(device)
            recon = model(x)
            perceptual = F.mse_loss(vgg(recon), vgg(x))
            loss = F.mse_loss(recon, x) + args.perceptual_weight * perceptual
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                    ema_p.mul_(args.ema_decay).add_(p, alpha=1 - args.ema_decay)

        with torch.no_grad():
            val_loss = F.mse_loss(ema_model(val_x), val_x)
        print(f"epoch {epoch}: train {loss.item():.4f} ema val {val_loss.item():.4f}")

    torch.save(model.module.state_dict(), "autoencoder.pt")
    torch.save(ema_model.state_dict(), "autoencoder_ema.pt")


if __name__ == "__main__":
    main()
