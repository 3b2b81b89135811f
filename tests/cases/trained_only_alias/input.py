import torch
import torch.nn as nn

Tensor = torch.Tensor
Model = nn.Module


def build() -> Model:
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(model: Model, optimizer, x: Tensor, y: Tensor) -> Tensor:
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def make_optimizer(module: Model) -> torch.optim.Optimizer:
    return torch.optim.Adam(module.parameters(), lr=1e-3)


def main():
    device = torch.device("cuda")
    model = build().to(device)
    optimizer = make_optimizer(model)
    for step in range(100):
        x = torch.randn(32, 10, device=device)
        y = Tensor(32, 1).normal_().to(device)
        train_step(model, optimizer, x, y)


if __name__ == "__main__":
    main()
