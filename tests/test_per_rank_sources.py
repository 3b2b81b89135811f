"""Data no DistributedSampler can shard, given per rank (steps.per_rank_sources): a sampler drawing
with replacement from a seeded generator, a seeded environment the loop plays, a stream cut into
columns by `batchify`. Conversion only: each test runs the sampler step on a short script."""

from __future__ import annotations

from migrate.steps.distributed_sampler import distributed_sampler
from tests.steps.helpers import run_step

SAMPLED = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset


def main():
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    g = torch.Generator()
    g.manual_seed(0)
    sampler = RandomSampler(dataset, replacement=REPLACEMENT, num_samples=10**9, generator=g)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_seeded_sampler_with_replacement_draws_from_the_seed_plus_the_rank() -> None:
    result = run_step(distributed_sampler, SAMPLED.replace("REPLACEMENT", "True"))
    assert result.added == ["    g.manual_seed(0 + dist.get_rank())"]
    assert [code for code, _ in result.codes] == ["MIG008"]
    assert "global batch grows" in result.findings[0].message


def test_a_sampler_without_replacement_is_still_reported_and_left_alone() -> None:
    result = run_step(distributed_sampler, SAMPLED.replace("REPLACEMENT", "False"))
    assert result.added == []
    assert [code for code, _ in result.codes] == ["MIG102"]


def test_a_generator_seeded_in_place_is_seeded_per_rank_there() -> None:
    code = SAMPLED.replace("REPLACEMENT", "True").replace("generator=g", "generator=torch.Generator().manual_seed(7)")
    result = run_step(distributed_sampler, code, target="horovod")
    assert "generator=torch.Generator().manual_seed(7 + hvd.rank()))" in result.text
    assert "g.manual_seed(0)" in result.text  # the generator the sampler does not read stays as it was


PLAYED = """
import argparse

import gym
import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    env = gym.make("CartPole-v1")
    eval_env = gym.make("CartPole-v1")
    eval_env.seed(args.seed)
    SEEDING
    policy = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for episode in range(10):
        obs, _ = env.reset(RESET)
        logits = policy(torch.as_tensor(obs, dtype=torch.float32))
        obs, reward, done, cut, _ = env.step(int(logits.argmax()))
        loss = -logits.log_softmax(-1).max() * reward
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_an_environment_seeded_once_is_seeded_with_the_seed_plus_the_rank() -> None:
    code = PLAYED.replace("SEEDING", "env.action_space.seed(args.seed)").replace("RESET", "")
    result = run_step(distributed_sampler, code)
    assert result.added == ["    env.action_space.seed(args.seed + dist.get_rank())"]
    assert [code for code, _ in result.codes] == ["MIG008"]


def test_an_episode_seed_is_spread_so_no_rank_replays_another() -> None:
    code = PLAYED.replace("SEEDING", "pass").replace("RESET", "seed=args.seed + episode")
    result = run_step(distributed_sampler, code)
    assert result.added == ["        obs, _ = env.reset(seed=(args.seed + episode) * dist.get_world_size() + dist.get_rank())"]


def test_a_vector_environment_moves_by_its_number_of_sub_environments() -> None:
    code = (PLAYED.replace('env = gym.make("CartPole-v1")', 'env = gym.vector.make("CartPole-v1", num_envs=4)')
            .replace("SEEDING", "env.reset(seed=args.seed)").replace("RESET", ""))
    result = run_step(distributed_sampler, code)
    assert result.added == ["    env.reset(seed=args.seed + dist.get_rank() * env.num_envs)"]


def test_an_environment_never_seeded_is_left_alone_with_a_note() -> None:
    result = run_step(distributed_sampler, PLAYED.replace("SEEDING", "pass").replace("RESET", ""))
    assert result.added == []
    assert [code for code, _ in result.codes] == ["MIG008"]
    assert "seeds its environment from the OS" in result.findings[0].message


def test_an_environment_whose_class_seeds_it_is_not_said_to_be_never_seeded() -> None:
    """`env = Emulator(args)`, its class seeding the emulator from `args.seed` in `__init__`: the
    same value on every rank, which this conversion does not edit there (MIG101 says where)."""
    code = PLAYED.replace("SEEDING", "pass").replace("RESET", "").replace(
        'env = gym.make("CartPole-v1")', "env = Emulator(args)").replace(
        "\n\ndef main():", "\n\nclass Emulator:\n    def __init__(self, args):\n        self.game = gym.make(\"CartPole-v1\")\n"
        "        self.game.configure(random_seed=args.seed)\n\n    def reset(self):\n        return self.game.reset()\n\n"
        "    def step(self, action):\n        return self.game.step(action)\n\n\ndef main():")
    result = run_step(distributed_sampler, code)
    assert result.added == []
    assert [code for code, _ in result.codes] == ["MIG101"]
    assert result.findings[0].message.startswith(
        "the training loop plays `env`, whose class seeds it itself (`self.game.configure(random_seed=args.seed)`)")


def test_a_seeding_before_setup_reads_the_launchers_rank() -> None:
    code = PLAYED.replace("SEEDING", "pass").replace("RESET", "").replace('    env = gym.make("CartPole-v1")\n', "")
    code = code.replace("\n\ndef main():", "\nenv = gym.make('CartPole-v1')\nenv.seed(3)\n\n\ndef main():")
    result = run_step(distributed_sampler, code)
    assert 'env.seed(3 + int(os.environ.get("RANK", "0")))' in result.added


COLUMNS = """
import torch
import torch.nn as nn


def batchify(data, bsz):
    data = data[: data.size(0) // bsz * bsz]
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i):
    return source[i:i + 4], source[i + 1:i + 5].view(-1)


def main():
    corpus = torch.randint(0, 10, (400,))
    train_data = batchify(corpus, 4)
    val_data = batchify(corpus, 2)
    model = nn.Embedding(10, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(0, train_data.size(0) - 1, 4):
        x, y = get_batch(train_data, i)
        loss = nn.functional.cross_entropy(model(x).view(-1, 10), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(val_data.shape)


if __name__ == "__main__":
    main()
"""


def test_a_stream_cut_into_columns_keeps_each_ranks_own_columns() -> None:
    result = run_step(distributed_sampler, COLUMNS)
    assert result.added == ["    train_data = batchify(corpus, 4 * dist.get_world_size())"
                            "[:, dist.get_rank()::dist.get_world_size()].contiguous()"]
    assert [code for code, _ in result.codes] == ["MIG008"]


def test_horovod_cuts_the_columns_by_its_own_rank_and_size() -> None:
    result = run_step(distributed_sampler, COLUMNS.replace("batchify(corpus, 4)", "batchify(corpus, 2 + 2)"), target="horovod")
    assert "batchify(corpus, (2 + 2) * hvd.size())[:, hvd.rank()::hvd.size()].contiguous()" in result.text
