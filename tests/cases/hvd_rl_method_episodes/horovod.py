"""An on-policy agent whose update lives in a method of its own class: the episode's `done`, which
each rank's environment decides, says how many times `agent.update()` runs its backward."""
import gym
import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 2)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=5e-4)
        self.rollout = []

    def remember(self, observation):
        self.rollout.append(observation)

    def update(self):
        observations = torch.tensor(self.rollout).float()
        loss = self.layer(observations).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.rollout = []


def main():
    env = gym.make("CartPole-v1")
    agent = Policy()
    for episode in range(50):
        observation, _ = env.reset()
        done = False
        while not done:
            for _ in range(16):
                observation, reward, done, truncated, _ = env.step(0)
                agent.remember(observation)
                if done:
                    break
            agent.update()


if __name__ == "__main__":
    main()
