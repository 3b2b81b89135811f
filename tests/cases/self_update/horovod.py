import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self, lr):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 1))
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr)

    def forward(self, x):
        return self.fc(x)

    def train_net(self, x, target):
        loss = F.smooth_l1_loss(self.forward(x), target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    q = QNet(lr=1e-3)
    q_target = QNet(lr=1e-3)
    q_target.load_state_dict(q.state_dict())
    for step in range(500):
        x = torch.randn(32, 3)
        with torch.no_grad():
            target = x.sum(dim=1, keepdim=True) + 0.1 * q_target(x)
        loss = q.train_net(x, target)
        if step % 100 == 0:
            q_target.load_state_dict(q.state_dict())
            print(f"step {step}: loss {loss:.4f}")
    torch.save(q.state_dict(), "q.pt")


if __name__ == "__main__":
    main()
