"""REINFORCE on CartPole: one episode per update."""

import argparse

import gym
import torch
import torch.nn as nn
import horovod.torch as hvd


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, obs):
        return torch.distributions.Categorical(logits=self.net(obs))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(args.seed)
    env = gym.make("CartPole-v1")
    env.action_space.seed(args.seed + hvd.rank())
    policy = Policy()
    hvd.broadcast_parameters(policy.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=policy.named_parameters())
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=(args.seed + episode) * hvd.size() + hvd.rank())
        log_probs, rewards = [], []
        done = False
        while not done:
            dist = policy(torch.as_tensor(obs, dtype=torch.float32))
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            obs, reward, terminated, truncated, _ = env.step(action.item())
            rewards.append(reward)
            done = terminated or truncated
        returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
        loss = -(torch.stack(log_probs) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if hvd.rank() == 0:
            print(f"episode {episode} return {sum(rewards):.0f}")
    if hvd.rank() == 0:
        torch.save(policy.state_dict(), "policy.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
