"""Messages say what the target does: under Horovod no finding names torch.distributed's API or a
model wrapper where Horovod does something else (its forward runs no collective, its weights are
made equal by hvd.broadcast_parameters, a shared decision is hvd.broadcast_object /
hvd.allreduce), and the torch.distributed targets keep their own words. Conversion only: fast."""

from __future__ import annotations

import pytest

from migrate import migrate_source
from migrate.records import Finding

OTHER_FRAMEWORKS = ("dist.", "torch.distributed", "DDP", "DistributedDataParallel", "wrapper", "wrap")
TRAINING = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def score(net, batches):
    with torch.no_grad():
        return sum(net(x).sum().item() for x, _ in batches)


def one_pass(net, batches, opt):
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
    return loss.item()


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4)
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
{body}


if __name__ == "__main__":
    main()
"""


def convert(body: str, target: str, script: str = TRAINING) -> tuple[str, list[Finding]]:
    result = migrate_source(script.format(body=body), target)
    return result.new, result.findings


def messages(findings: list[Finding], code: str) -> list[str]:
    return [f.message for f in findings if f.code == code]


def names_no_other_framework(message: str) -> None:
    for word in OTHER_FRAMEWORKS:
        assert word not in message, f"{word!r} in a Horovod message: {message}"


# -- rank_zero: a print or a file written from a value that runs the model ----------------------


def test_horovod_guards_a_print_of_a_forward_on_rank_zero_without_computing_it_everywhere() -> None:
    new, findings = convert('        one_pass(model, loader, optimizer)\n        print("score", score(model, loader))', "horovod")
    assert '    if hvd.rank() == 0:\n            print("score", score(model, loader))' in new
    assert "computed on every rank" not in new
    assert not messages(findings, "MIG112")


def test_ddp_computes_a_print_of_a_forward_on_every_rank_first() -> None:
    new, _ = convert('        one_pass(model, loader, optimizer)\n        print("score", score(model, loader))', "ddp")
    assert "message = score(model, loader)  # computed on every rank: it may run the model" in new
    assert 'print("score", message)' in new


@pytest.mark.parametrize("target", ["horovod", "ddp", "fsdp"])
def test_a_print_of_a_function_that_runs_backward_is_computed_on_every_rank(target: str) -> None:
    new, _ = convert('        print("loss", one_pass(model, loader, optimizer))', target)
    said = "a backward pass or a collective" if target == "horovod" else "the model"
    assert f"message = one_pass(model, loader, optimizer)  # computed on every rank: it may run {said}" in new


def test_horovod_mig112_names_a_backward_or_a_collective_not_the_model() -> None:
    _, findings = convert('        print(*[one_pass(model, loader, optimizer)])', "horovod")
    [message] = messages(findings, "MIG112")
    assert "may run a backward pass or a collective, which every rank must join" in message
    _, findings = convert('        print(*[one_pass(model, loader, optimizer)])', "ddp")
    assert messages(findings, "MIG112") == ["this print computes a value that may need every rank; left printing on every rank"]


WRITES_FORWARD = '''\
        one_pass(model, loader, optimizer)
    with open("scores.txt", "w") as out:
        out.write(str(model(torch.ones(1, 3)).item()))'''

WRITES_TRAINING = '''\
        pass
    with open("losses.txt", "w") as out:
        out.write(str(one_pass(model, loader, optimizer)))'''


def test_horovod_writes_a_file_of_forward_results_on_rank_zero_only() -> None:
    new, findings = convert(WRITES_FORWARD, "horovod")
    assert '    if hvd.rank() == 0:\n        with open("scores.txt", "w") as out:' in new
    assert not messages(findings, "MIG120")


@pytest.mark.parametrize("target", ["ddp", "fsdp"])
def test_torch_targets_leave_a_file_of_forward_results_on_every_rank(target: str) -> None:
    _, findings = convert(WRITES_FORWARD, target)
    [message] = messages(findings, "MIG120")
    assert "calls `model(...)`, which may run the model that every rank must join" in message


def test_horovod_mig120_names_the_backward_the_body_runs() -> None:
    new, findings = convert(WRITES_TRAINING, "horovod")
    [message] = messages(findings, "MIG120")
    assert "calls `one_pass(...)`, which may run a backward pass or a collective that every rank must join" in message
    assert "under `if hvd.rank() == 0:`" in message
    assert "the model" not in message
    names_no_other_framework(message)
    assert '    with open("losses.txt", "w") as out:' in new  # left on every rank


# -- analysis/divergence and analysis/episodes: advice for a value every rank must share --------


RANDOM_PASSES = '''\
        for step in range(random.randint(1, 3)):
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()'''


@pytest.mark.parametrize(("target", "advice"), [("horovod", "hvd.broadcast_object"), ("ddp", "dist.broadcast_object_list")])
def test_mig122_advises_the_targets_broadcast_of_a_python_value(target: str, advice: str) -> None:
    without_one_pass = TRAINING[:TRAINING.index("def one_pass")] + TRAINING[TRAINING.index("def main"):]
    _, findings = convert(RANDOM_PASSES, target, "import random\n" + without_one_pass)
    [message] = messages(findings, "MIG122")
    assert f"draw it on rank 0 and broadcast it ({advice})" in message
    if target == "horovod":
        names_no_other_framework(message)


EPISODES = """\
import gym
import torch
import torch.nn as nn


def main():
    env = gym.make("CartPole-v1")
    policy = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(policy.parameters())
    seen = []
    for game in range(10):
        state, _ = env.reset()
        for t in range(100):
            action = int(policy(torch.tensor(state, dtype=torch.float)).argmax())
            state, reward, finished, _, _ = env.step(action)
            seen.append(reward)
            if len(seen) > 64:
                loss = -policy(torch.tensor(state, dtype=torch.float)).sum() * reward
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(("target", "broadcast", "minimum"), [
    ("horovod", "hvd.broadcast_object", "hvd.allreduce(t, op=hvd.Min)"),
    ("ddp", "dist.broadcast_object_list", "dist.all_reduce(t, op=dist.ReduceOp.MIN)"),
])
def test_mig121_on_environment_state_advises_the_targets_collectives(target: str, broadcast: str, minimum: str) -> None:
    result = migrate_source(EPISODES, target)
    [message] = messages(result.findings, "MIG121")
    assert f"broadcast it with {broadcast}," in message and f"all-reduce the count first with {minimum})" in message
    if target == "horovod":
        names_no_other_framework(message)


# -- weights drawn again after rank 0's were made every rank's ----------------------------------


REINITIALISED = '''\
        if epoch == 1:
            model.reset_parameters()
        one_pass(model, loader, optimizer)'''


def test_horovod_mig123_names_the_broadcast_not_a_wrapper() -> None:
    new, findings = convert(REINITIALISED, "horovod")
    assert TRAINING.splitlines()[21] == "    model = nn.Linear(3, 1)"  # line 22
    assert "    model = nn.Linear(3, 1)\n    hvd.broadcast_parameters(model.state_dict(), root_rank=0)" in new
    [message] = messages(findings, "MIG123")
    assert "after rank 0's weights are broadcast (the broadcast goes after line 22)" in message
    assert "the broadcast copied rank 0's weights to every rank, so" in message
    assert "initialise before the broadcast, or broadcast the weights again afterwards (hvd.broadcast_parameters)" in message
    names_no_other_framework(message)


def test_ddp_mig123_names_its_wrapper() -> None:
    _, findings = convert(REINITIALISED, "ddp")
    [message] = messages(findings, "MIG123")
    assert "the wrapper copied rank 0's weights to every rank when it was built" in message


# -- wrap_model: what takes nn.DataParallel's place ----------------------------------------------


DATA_PARALLEL = TRAINING.replace(
    "    optimizer = torch.optim.SGD", "    model.load_state_dict(torch.load('old.pt'))\n    optimizer = torch.optim.SGD"
).replace("    model = nn.Linear(3, 1)\n", "    model = nn.DataParallel(nn.Linear(3, 1))\n")


@pytest.mark.parametrize(("target", "replaced", "load"), [
    ("horovod", "replaced by hvd.DistributedOptimizer and the broadcast of rank 0's weights", "now loads into the module"),
    ("ddp", "replaced by the distributed wrapper", "now runs before the wrap, into the module"),
])
def test_mig003_names_what_replaces_data_parallel(target: str, replaced: str, load: str) -> None:
    _, findings = convert("        one_pass(model, loader, optimizer)", target, DATA_PARALLEL)
    [message] = messages(findings, "MIG003")
    assert f"nn.DataParallel on `model` removed, {replaced};" in message
    assert f"the load on line 23 {load} itself" in message
    if target == "horovod":
        names_no_other_framework(message)
