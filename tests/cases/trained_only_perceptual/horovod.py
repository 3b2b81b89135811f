import torch
import torch.nn as nn
import torchvision
import horovod.torch as hvd


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))

    def forward(self, x):
        return self.net(x)


def make_optimizer(module, lr):
    return torch.optim.Adam(module.parameters(), lr=lr)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = Generator().to(device)
    hvd.broadcast_parameters(generator.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    vgg = torchvision.models.vgg16(weights="DEFAULT").features[:16].to(device)
    for p in vgg.parameters():
        p.requires_grad_(False)
    optimizer = make_optimizer(generator, 1e-4)
    optimizer = hvd.DistributedOptimizer(optimizer)
    for step in range(100):
        x = torch.randn(8, 3, 64, 64, device=device)
        y = generator(x)
        with torch.no_grad():
            target_features = vgg(x)
        loss = nn.functional.mse_loss(vgg(y), target_features)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
