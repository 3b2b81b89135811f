import torch
import torch.nn as nn
import horovod.torch as hvd

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
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build().to(device)
    optimizer = make_optimizer(model)
    optimizer = hvd.DistributedOptimizer(optimizer)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    for step in range(100):
        x = torch.randn(32, 10, device=device)
        y = Tensor(32, 1).normal_().to(device)
        train_step(model, optimizer, x, y)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
