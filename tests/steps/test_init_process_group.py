"""init_process_group's `setup` and `teardown`: setup (the launcher's environment filled in for a plain run,
the local rank's GPU, the process group) first thing in the entry point; a barrier and
destroy_process_group at its end."""

from __future__ import annotations

from migrate.steps.init_process_group import setup, teardown
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
"""

SETUP = [
    "    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)",
    '    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():',
    "        os.environ.setdefault(key, value)",
    '    local_rank = int(os.environ["LOCAL_RANK"])',
    "    if torch.cuda.is_available():",
    "        torch.cuda.set_device(local_rank)",
    '    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")',
    "",
]
TEARDOWN = [
    "    dist.barrier()  # no rank exits while rank 0 still writes its files",
    "    dist.destroy_process_group()",
]

CALLED_WITHOUT_MAIN_GUARD = SCRIPT.replace('if __name__ == "__main__":\n    main()\n', "main()\n")

RETURNS_TRAINING = SCRIPT.replace("def main():", "def train():").replace(
    '    torch.save(model.state_dict(), "model.pt")\n', "    return loss.item()\n").replace(
    '\n\nif __name__ == "__main__":', '\n\ndef main():\n    return train()\n\n\nif __name__ == "__main__":')


def test_setup_opens_the_entry_function() -> None:
    result = run_step(setup, SCRIPT)
    assert result.removed == []
    assert result.added == SETUP
    assert result.text.index(SETUP[0]) > result.text.index("def main():\n")
    assert result.text.index(SETUP[-2]) < result.text.index("    loader = DataLoader(")
    assert result.imports == ["import os", "import torch.distributed as dist"]
    assert result.findings == ()


def test_setup_names_its_loop_variables_apart_from_the_script_s() -> None:
    """A script with a `value` of its own: setup at module level would rebind it."""
    script = SCRIPT.replace("        loss = nn.functional", "        value = 1.0\n        loss = value * nn.functional")
    result = run_step(setup, script)
    assert result.added[1].startswith("    for env_key, env_value in dict(RANK=")
    assert result.added[2] == "        os.environ.setdefault(env_key, env_value)"


def test_without_an_entry_point_setup_goes_at_module_level_and_is_reported() -> None:
    result = run_step(setup, CALLED_WITHOUT_MAIN_GUARD)
    assert result.added == ["", *(line.removeprefix("    ") for line in SETUP[:-1])]
    assert result.text.index("dist.init_process_group(") < result.text.index("def main():")
    assert result.codes == [("MIG108", 6)]


def test_setup_leaves_everything_else_as_it_was() -> None:
    """No rule here has a script it skips (a module that only defines functions is refused by the
    API before any step runs): the no-op is that nothing but the setup block and its imports changes."""
    result = run_step(setup, SCRIPT)
    rest = result.text.replace("\n".join(SETUP) + "\n", "")
    for line in result.imports:
        rest = rest.replace(line + "\n", "", 1)
    assert rest == result.source


def test_teardown_closes_the_entry_function() -> None:
    result = run_step(teardown, SCRIPT)
    assert result.removed == []
    assert result.added == TEARDOWN
    assert result.text.endswith(
        '    torch.save(model.state_dict(), "model.pt")\n' + "\n".join(TEARDOWN) + '\n\n\nif __name__ == "__main__":\n    main()\n'
    )
    assert result.findings == ()


def test_teardown_waits_for_a_returned_value_that_trains() -> None:
    """`return train()` trains while computing the value: the group goes after it, not before."""
    result = run_step(teardown, RETURNS_TRAINING)
    assert result.removed == ["    return train()"]
    assert result.added == ["    result = train()", *TEARDOWN, "    return result"]


def test_teardown_leaves_everything_else_as_it_was() -> None:
    result = run_step(teardown, SCRIPT)
    rest = result.text.replace("\n".join(TEARDOWN) + "\n", "")
    for line in result.imports:
        rest = rest.replace(line + "\n", "", 1)
    assert rest == result.source
