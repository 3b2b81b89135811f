"""Two shapes of real scripts (corpus w044), converted only (no process runs):

- an endless `while True:` whose passes are counted by hand (`cur_epochs += 1` before the sweep
  over the loader): that counter is the epoch, and `set_epoch(cur_epochs)` goes right after it;
  MIG103 still fires where no such counter is, saying what the script has;
- an optimizer whose param groups are parts of the model (`model.backbone.parameters()`), while
  training calls the whole model: the model is wrapped (no MIG104 "never calls by name").
"""

from __future__ import annotations

import pytest

from migrate import migrate_source

HEAD = '''import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = DataLoader(TensorDataset(torch.randn(32, 3), torch.randn(32, 1)), batch_size=4, shuffle=True)
    rounds, seen = 0, 0
'''
STEP = "opt.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); opt.step()"
TAIL = '''

if __name__ == "__main__":
    main()
'''


def _script(loop: str) -> str:
    return HEAD + loop + TAIL


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def _mig103(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.message for f in result.findings if f.code == "MIG103"]


COUNTED = f'''    while True:
        rounds += 1
        for x, y in data:
            seen += 1
            {STEP}
            if seen >= 20:
                return
'''


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod", "deepspeed"])
def test_a_pass_counter_of_while_true_is_the_epoch(target: str) -> None:
    result = migrate_source(_script(COUNTED), target)
    lines = _lines(result.new)
    at = lines.index("rounds += 1")
    assert lines[at + 1] == "data.sampler.set_epoch(rounds)"
    assert lines[at + 2] == "for x, y in data:"
    assert not _mig103(result)


def test_the_counter_of_a_caller_loop_is_the_epoch_under_the_caller_name() -> None:
    source = HEAD.replace("    rounds, seen = 0, 0\n", "    rounds = 0\n") + '''    while rounds < 5:
        rounds += 1
        sweep(model, opt, data)


def sweep(model, opt, batches):
    for x, y in batches:
        ''' + STEP + TAIL
    result = migrate_source(source, "ddp")
    lines = _lines(result.new)
    assert lines[lines.index("rounds += 1") + 1] == "data.sampler.set_epoch(rounds)"
    assert not _mig103(result)


@pytest.mark.parametrize("loop, where", [
    (f"    while seen < 20:\n        for x, y in data:\n            seen += 1\n            {STEP}\n", "no counter"),
    (f"    while True:\n        if seen < 3:\n            rounds += 1\n        for x, y in data:\n            {STEP}\n", "inside an if"),
    (f"    while True:\n        rounds += 1\n        rounds = rounds % 2\n        for x, y in data:\n            {STEP}\n", "reset"),
    (f"    while True:\n        rounds += 2\n        for x, y in data:\n            {STEP}\n", "not by one"),
])
def test_no_counter_raised_once_per_pass_keeps_mig103_saying_so(loop: str, where: str) -> None:
    result = migrate_source(_script(loop), "ddp")
    assert "set_epoch" not in result.new, where
    [message] = _mig103(result)
    assert message.startswith("epochs repeat in the `while` loop at line 10 with no epoch number to pass to set_epoch: "
                              "no counter is raised by one in each pass before the training loop (line 1"), message
    assert "data.sampler.set_epoch(epoch)" in message


def test_an_outer_for_without_a_plain_variable_is_not_called_a_loader_it_cannot_follow() -> None:
    loop = f"    for (a, b) in [(1, 2), (3, 4)]:\n        for x, y in data:\n            {STEP}\n"
    [message] = _mig103(migrate_source(_script(loop), "ddp"))
    assert "not a DataLoader" not in message
    assert message.startswith("epochs repeat in the loop at line 10, whose variable is not one plain name,"), message


def test_an_outer_for_without_a_plain_variable_takes_its_counter() -> None:
    loop = f"    for (a, b) in [(1, 2), (3, 4)]:\n        rounds = rounds + 1\n        for x, y in data:\n            {STEP}\n"
    lines = _lines(migrate_source(_script(loop), "ddp").new)
    assert lines[lines.index("rounds = rounds + 1") + 1] == "data.sampler.set_epoch(rounds)"


PARTS = '''import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.top = nn.Linear(4, 1)

    def forward(self, x):
        return self.top(self.trunk(x))


def main():
    model = Net()
    optimizer = torch.optim.SGD([{"params": model.trunk.parameters(), "lr": 0.01}, {"params": model.top.parameters()}], lr=0.1)
MOVE    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_ddp_wraps_the_model_whose_parts_the_groups_hold() -> None:
    result = migrate_source(PARTS.replace("MOVE", ""), "ddp")
    assert not [f for f in result.findings if f.code == "MIG104"], [f.message for f in result.findings]
    lines = _lines(result.new)
    assert lines.index("model = DDP(model)") < next(i for i, line in enumerate(lines) if line.startswith("optimizer ="))
    assert '{"params": model.module.trunk.parameters(), "lr": 0.01}, {"params": model.module.top.parameters()}' in result.new


def test_horovod_names_the_parameters_of_every_group() -> None:
    result = migrate_source(PARTS.replace("MOVE", ""), "horovod")
    assert not [f for f in result.findings if f.code == "MIG104"]
    assert 'model.trunk.named_parameters(prefix="model.trunk"), model.top.named_parameters(prefix="model.top")' in result.new


def test_fsdp_shards_the_model_before_the_groups_are_built() -> None:
    result = migrate_source(PARTS.replace("MOVE", ""), "fsdp")
    assert not [f for f in result.findings if f.code in ("MIG104", "MIG303")]
    lines = _lines(result.new)
    assert next(i for i, line in enumerate(lines) if line.startswith("fully_shard(model")) < next(i for i, line in enumerate(lines) if line.startswith("optimizer ="))


def test_fsdp_shards_above_the_groups_when_the_model_is_moved_after_them() -> None:
    result = migrate_source(PARTS.replace("MOVE", '    model.to("cpu")\n'), "fsdp")
    lines = _lines(result.new)
    assert next(i for i, line in enumerate(lines) if line.startswith("fully_shard(model")) < next(i for i, line in enumerate(lines) if line.startswith("optimizer ="))


def test_a_part_of_a_plain_class_is_still_refused_where_it_runs() -> None:
    source = PARTS.replace("class Net(nn.Module):", "class Net:").replace("super().__init__()", "pass").replace(
        "def forward(self, x):", "def __call__(self, x):").replace("MOVE", "")
    result = migrate_source(source, "ddp")
    assert "DDP(" not in result.new


RUNNABLE = '''import argparse
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 8)
        self.top = nn.Linear(8, 1)

    def forward(self, x):
        return self.top(torch.tanh(self.trunk(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--save", default="net.pt")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD([{"params": model.trunk.parameters(), "lr": 0.02}, {"params": model.top.parameters()}], lr=0.2)
    generator = torch.Generator().manual_seed(1)
    rows = TensorDataset(torch.randn(48, 4, generator=generator), torch.randn(48, 1, generator=generator))
    loader = DataLoader(rows, batch_size=args.batch_size, shuffle=False)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
@pytest.mark.full
def test_groups_of_parts_under_ddp_learn_what_the_original_learns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """2 ranks at batch 6 (gloo) against one process at batch 12: the same weights, under the
    original keys (the groups' different rates included)."""
    from tests.equivalence.harness import assert_same_weights, run_python, run_torchrun

    original, converted = tmp_path / "original.py", tmp_path / "converted.py"
    original.write_text(RUNNABLE)
    result = migrate_source(RUNNABLE, "ddp", path=str(converted))
    assert "model = DDP(model)" in result.new, [f.message for f in result.findings]
    converted.write_text(result.new)
    reference = run_python(original, ["--batch-size", "12"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, ["--batch-size", "6"], tmp_path / "ddp.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
