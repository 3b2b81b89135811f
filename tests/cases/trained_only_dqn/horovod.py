import copy

import torch
import torch.nn as nn
import horovod.torch as hvd

tau = 0.005


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.fc(x)


def make_optimizer(module, lr):
    return torch.optim.Adam(module.parameters(), lr=lr)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = QNet().to(device)
    target_net = QNet().to(device)
    target_net.load_state_dict(model.state_dict())
    optimizer = make_optimizer(model, 1e-3)
    optimizer = hvd.DistributedOptimizer(optimizer)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    for step in range(1000):
        state = torch.randn(32, 4, device=device)
        next_state = torch.randn(32, 4, device=device)
        reward = torch.randn(32, device=device)
        q = model(state).max(1).values
        with torch.no_grad():
            target = reward + 0.99 * target_net(next_state).max(1).values
        loss = nn.functional.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for p, tp in zip(model.parameters(), target_net.parameters()):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
