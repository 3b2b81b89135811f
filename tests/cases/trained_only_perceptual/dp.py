import torch
import torch.nn as nn
import torchvision


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))

    def forward(self, x):
        return self.net(x)


def make_optimizer(module, lr):
    return torch.optim.Adam(module.parameters(), lr=lr)


def main():
    device = torch.device("cuda")
    generator = Generator().to(device)
    generator = nn.DataParallel(generator)  # splits each batch across the GPUs
    vgg = torchvision.models.vgg16(weights="DEFAULT").features[:16].to(device)
    for p in vgg.parameters():
        p.requires_grad_(False)
    optimizer = make_optimizer(generator, 1e-4)
    for step in range(100):
        x = torch.randn(8, 3, 64, 64, device=device)
        y = generator(x)
        with torch.no_grad():
            target_features = vgg(x)
        loss = nn.functional.mse_loss(vgg(y), target_features)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
