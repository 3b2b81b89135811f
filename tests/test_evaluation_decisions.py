"""A save decided on what the model computed on this rank (`if score > best:` after
`score = accuracy(net, held_out)`): under a sharded model (FSDP, ZeRO-3) the gather for the save
runs on the ranks whose test holds, so the conversion is refused where something in the program
makes the ranks' scores differ (BatchNorm statistics, episodes of each rank's own environment)
and written where every rank evaluates the same weights on the same data. Conversions only.
The refused BatchNorm shape is the golden case best_checkpoint_batchnorm."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

PLAIN = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def accuracy(net, loader):
    right = 0
    with torch.no_grad():
        for x, y in loader:
            right += (net(x).argmax(1) == y).sum().item()
    return right / len(loader.dataset)


def main():
    data, labels = torch.randn(96, 8), torch.randint(0, 4, (96,))
    train_loader = DataLoader(TensorDataset(data[:64], labels[:64]), batch_size=8, shuffle=True)
    held_out = DataLoader(TensorDataset(data[64:], labels[64:]), batch_size=16)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    best = 0.0
    for epoch in range(3):
        for x, y in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
        score = accuracy(net, held_out)
        if score > best:
            best = score
            torch.save(net.state_dict(), "best.pt")


if __name__ == "__main__":
    main()
'''


def test_the_same_weights_on_the_same_data_decide_alike_and_the_save_is_converted() -> None:
    """No BatchNorm, an unsharded held-out loader: every rank computes the same score. The model
    read in the backward's own expression (`cross_entropy(net(x), y).backward()`) does not make
    every later use of `net` a value of this rank's batches."""
    for target in ("fsdp", "deepspeed"):
        result = migrate_source(PLAIN, target)
        assert not [f for f in result.findings if f.code == "MIG121"], target
        assert result.new != PLAIN, target


def test_batch_norm_statistics_make_the_score_differ_and_fsdp_is_refused() -> None:
    script = PLAIN.replace("nn.Sequential(nn.Linear(8, 16), nn.ReLU(),", "nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(),")
    result = migrate_source(script, "fsdp")
    [finding] = [f for f in result.findings if f.code == "MIG121"]
    assert result.new == script
    assert "runs only when `score > best` (line 27) holds" in finding.message
    assert "`score` comes from `accuracy(net, held_out)` (line 26), which runs the model on this rank" in finding.message
    assert "BatchNorm layers that train.py builds" in finding.message


AGENT = '''import torch


def keep_best(policy, path):
    torch.save(policy.state_dict(), path)
'''

PLAYS = '''import gym
import torch
import torch.nn as nn
from agent import keep_best


def evaluate(policy, episodes):
    env = gym.make("CartPole-v1")
    total = 0.0
    for _ in range(episodes):
        state, done = env.reset()[0], False
        while not done:
            action = policy(torch.as_tensor(state, dtype=torch.float32)).argmax().item()
            state, reward, done, _, _ = env.step(action)
            total += reward
    return total / episodes


def main():
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    best = float("-inf")
    for update in range(10):
        states = torch.randn(32, 4)
        loss = -policy(states).log_softmax(-1)[:, 0].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_return = evaluate(policy, 3)
        if mean_return > best:
            best = mean_return
            keep_best(policy, "best.pt")


if __name__ == "__main__":
    main()
'''


def test_a_score_played_in_this_ranks_environment_is_refused_under_fsdp(tmp_path: Path) -> None:
    """The save lives in agent.py (joined to the script as one program); the score is what the
    policy played in an environment of its own on each rank."""
    (tmp_path / "agent.py").write_text(AGENT)
    result = migrate_source(PLAYS, "fsdp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    [finding] = [f for f in result.findings if f.code == "MIG121"]
    assert result.new == PLAYS and not result.modules
    assert "in agent.py (line 5): the gather of `policy`'s weights for saving runs only when `mean_return > best` (line 30 of train.py) holds" in finding.message
    assert "`env` (line 8 of train.py) plays this rank's own episodes" in finding.message
