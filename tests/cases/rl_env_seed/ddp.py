"""REINFORCE on CartPole: one episode per update."""

import argparse
import os

import gym
import torch
import torch.nn as nn
import torch.distributed as dist_
from torch.nn.parallel import DistributedDataParallel as DDP


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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist_.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(args.seed)
    env = gym.make("CartPole-v1")
    env.action_space.seed(args.seed + dist_.get_rank())
    policy = Policy()
    policy = DDP(policy)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=(args.seed + episode) * dist_.get_world_size() + dist_.get_rank())
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
        if dist_.get_rank() == 0:
            print(f"episode {episode} return {sum(rewards):.0f}")
    if dist_.get_rank() == 0:
        torch.save(policy.module.state_dict(), "policy.pt")
    dist_.barrier()  # no rank exits while rank 0 still writes its files
    dist_.destroy_process_group()


if __name__ == "__main__":
    main()
