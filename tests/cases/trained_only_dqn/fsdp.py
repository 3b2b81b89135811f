import copy

import torch
import torch.nn as nn

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
    device = torch.device("cuda")
    model = QNet().to(device)
    target_net = QNet().to(device)
    target_net.load_state_dict(model.state_dict())
    optimizer = make_optimizer(model, 1e-3)
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


if __name__ == "__main__":
    main()
