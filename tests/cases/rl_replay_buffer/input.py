import collections
import random

import gym
import torch
import torch.nn as nn
import torch.nn.functional as F


class Buffer:
    def __init__(self, limit):
        self.items = collections.deque(maxlen=limit)

    def add(self, item):
        self.items.append(item)

    def sample(self, n):
        batch = random.sample(self.items, n)
        s, a, r, s2, d = zip(*batch)
        return (torch.tensor(s, dtype=torch.float), torch.tensor(a).unsqueeze(1), torch.tensor(r).unsqueeze(1),
                torch.tensor(s2, dtype=torch.float), torch.tensor(d, dtype=torch.float).unsqueeze(1))

    def __len__(self):
        return len(self.items)


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.body(x)


def update(qnet, target, buffer, optimizer):
    for _ in range(5):
        s, a, r, s2, d = buffer.sample(16)
        chosen = qnet(s).gather(1, a)
        wanted = r + 0.98 * target(s2).max(1)[0].unsqueeze(1) * (1 - d)
        loss = F.smooth_l1_loss(chosen, wanted)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    env = gym.make("CartPole-v1")
    qnet, target = QNet(), QNet()
    target.load_state_dict(qnet.state_dict())
    buffer = Buffer(10000)
    optimizer = torch.optim.Adam(qnet.parameters(), lr=5e-4)
    for episode in range(300):
        state, _ = env.reset()
        finished = False
        while not finished:
            action = random.randrange(2) if random.random() < 0.1 else qnet(torch.tensor(state)).argmax().item()
            after, reward, finished, truncated, _ = env.step(action)
            buffer.add((state, action, reward / 100.0, after, float(finished)))
            state = after
        if len(buffer) > 500:
            update(qnet, target, buffer, optimizer)
        if episode % 20 == 0:
            target.load_state_dict(qnet.state_dict())
    env.close()


if __name__ == "__main__":
    main()
