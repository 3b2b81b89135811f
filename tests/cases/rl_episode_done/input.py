import numpy as np
import gym
import torch
import torch.nn as nn

CAPACITY = 1000
env = gym.make("CartPole-v1")


class Agent:
    def __init__(self):
        self.net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.01)
        self.stored = 0
        self.table = np.zeros((CAPACITY, 10))

    def remember(self, s, a, r, s2):
        self.table[self.stored % CAPACITY] = np.hstack((s, [a, r], s2))
        self.stored += 1

    def learn(self):
        rows = torch.tensor(self.table[np.random.choice(CAPACITY, 32)], dtype=torch.float)
        guess = self.net(rows[:, :4]).gather(1, rows[:, 4:5].long())
        loss = (guess - rows[:, 5:6]).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def run():
    agent = Agent()
    for game in range(200):
        s, _ = env.reset()
        for t in range(500):
            a = int(agent.net(torch.tensor(s, dtype=torch.float)).argmax())
            s2, r, over, cut, _ = env.step(a)
            agent.remember(s, a, r, s2)
            if agent.stored > CAPACITY:
                agent.learn()
            if over:
                break
            s = s2


if __name__ == "__main__":
    run()
