"""rank_divergence on reinforcement learning: training gated on what this rank's own environment
returned (a replay buffer's size, a transition counter, an episode's `done`) is MIG121 and refused,
since the ranks would run different numbers of gradient all-reduces; gates every rank shares
(accumulation windows, episode numbers) are not reported."""

from __future__ import annotations

from migrate.steps.rank_divergence import rank_divergence, rank_divergent_control
from tests.steps.helpers import run_step

PLAYS = """\
import gym
import torch
import torch.nn as nn


def learn(net, optimizer, seen):
    loss = net(torch.tensor(seen[-8:], dtype=torch.float)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main():
    env = gym.make("CartPole-v1")
    net = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    seen = []
    for episode in range(50):
        obs, _ = env.reset()
        for t in range(200):
            obs, reward, over, cut, _ = env.step(0)
            seen.append(obs)
        if GATE:
            learn(net, optimizer, seen)


if __name__ == "__main__":
    main()
"""


def test_a_step_gated_on_the_buffer_of_this_ranks_episodes_is_refused() -> None:
    result = run_step(rank_divergence, PLAYS.replace("GATE", "len(seen) > 1000"))
    assert result.refused
    assert result.codes == [("MIG121", 23)]
    message = result.findings[0].message
    assert "`if len(seen) > 1000:` (line 23)" in message and "`seen`" in message and "broadcast" in message


def test_leaving_a_loop_of_backward_passes_when_the_episode_ends_is_refused() -> None:
    inline = PLAYS.replace("            seen.append(obs)\n", "            seen.append(obs)\n            learn(net, optimizer, seen)\n"
                           "            if over:\n                break\n").replace("GATE", "episode > 3")
    result = run_step(rank_divergent_control, inline)
    assert result.refused
    assert result.codes == [("MIG121", 24)]
    assert "`if over:` (line 24) `break` leaves a loop of backward passes" in result.findings[0].message


def test_gates_every_rank_shares_are_converted() -> None:
    for gate in ("(episode + 1) % 4 == 0", "episode > 10"):
        result = run_step(rank_divergence, PLAYS.replace("GATE", gate))
        assert not result.refused and result.codes == []


def test_leaving_a_loop_without_backward_passes_is_converted() -> None:
    ends = PLAYS.replace("            seen.append(obs)\n", "            seen.append(obs)\n            if over:\n                break\n")
    result = run_step(rank_divergence, ends.replace("GATE", "episode % 2 == 0"))
    assert not result.refused and result.codes == []
