"""The trained model a training function returns, used by its caller (`losses, model = main()`,
then `torch.save(model.state_dict(), path)` in the `__main__` block).

- The process group's teardown goes after the caller's use, at the end of the caller's block: an
  FSDP or ZeRO-3 gather of the weights there needs the group (a RuntimeError after teardown).
- Where the caller binds the name again under a branch (`if ...: model = nn.Linear(4, 1)` to
  reload), the conversion cannot follow which model a use means: DDP, FSDP and DeepSpeed leave the
  file unchanged with MIG104 at the save (Horovod keeps the user's module, so it converts). In
  straight-line code it converts (tests/test_factory_and_reuse.py).
- Where the teardown cannot follow the use, the file is left unchanged with MIG104 as well.
Conversion only: tests/equivalence/test_model_returned_then_saved.py runs the converted scripts.
"""

from __future__ import annotations

import pytest

from migrate import migrate_source

TRAIN = """\
import sys

import torch
import torch.nn as nn


def main():
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 3), torch.randn(32, 2)), batch_size=4)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    return [0.5], model


"""

REBOUND = TRAIN + """\
if __name__ == "__main__":
    history, model = main()
    torch.save(model.state_dict(), "weights.pt")
    if len(sys.argv) > 1:
        model = nn.Linear(3, 2)
    model.load_state_dict(torch.load("weights.pt"))
"""

SAVED = TRAIN + """\
if __name__ == "__main__":
    history, model = main()
    torch.save(model.state_dict(), "weights.pt")
    print(history)
"""


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize("target", ["ddp", "fsdp", "deepspeed"])
def test_a_returned_model_whose_name_is_bound_again_is_refused_at_its_save(target: str) -> None:
    result = migrate_source(REBOUND, target, path="fit.py")
    assert result.new == REBOUND
    refusals = [f for f in result.findings if f.code == "MIG104"]
    assert len(refusals) == 1, [f.message for f in result.findings]
    assert (refusals[0].line, refusals[0].col) == (21, 5)  # the `torch.save(model.state_dict(), ...)` line
    assert "also binds `model` at line 23" in refusals[0].message


def test_horovod_converts_it_the_model_stays_the_users_module() -> None:
    result = migrate_source(REBOUND, "horovod", path="fit.py")
    assert result.new != REBOUND and not [f for f in result.findings if f.code == "MIG104"]


@pytest.mark.parametrize(("target", "gather"), [("fsdp", "get_model_state_dict(model"),
                                                ("deepspeed", "GatheredParameters(list(model.module.parameters()))")])
def test_the_gather_in_the_caller_runs_before_teardown(target: str, gather: str) -> None:
    result = migrate_source(SAVED, target, path="fit.py")
    lines = _lines(result.new)
    main_block = lines.index('if __name__ == "__main__":')
    gathered = next(i for i, line in enumerate(lines) if gather in line)
    destroyed = lines.index("dist.destroy_process_group()")
    assert main_block < gathered < destroyed
    assert lines[-2:] == ["dist.barrier()  # no rank exits while rank 0 still writes its files",
                          "dist.destroy_process_group()"]
    assert lines.count("dist.destroy_process_group()") == 1


def test_ddp_saves_the_module_then_tears_down_in_the_caller() -> None:
    lines = _lines(migrate_source(SAVED, "ddp", path="fit.py").new)
    assert lines.index('torch.save(model.module.state_dict(), "weights.pt")') < lines.index("dist.destroy_process_group()")
    assert lines[-1] == "dist.destroy_process_group()"


def test_a_caller_that_does_not_use_the_model_keeps_teardown_in_the_function() -> None:
    script = TRAIN + 'if __name__ == "__main__":\n    history, model = main()\n    print(history)\n'
    lines = _lines(migrate_source(script, "fsdp", path="fit.py").new)
    assert lines.index("dist.destroy_process_group()") == lines.index("return [0.5], model") - 1


def test_a_caller_ending_in_a_plain_exit_tears_down_before_it() -> None:
    script = SAVED + "    sys.exit(0)\n"
    lines = _lines(migrate_source(script, "fsdp", path="fit.py").new)
    assert lines[-3:] == ["dist.barrier()  # no rank exits while rank 0 still writes its files",
                          "dist.destroy_process_group()", "sys.exit(0)"]


@pytest.mark.parametrize(("tail", "why"), [
    ("    sys.exit(len(history))\n", "the block ends in a statement that computes"),
    ("    main()\n", "`main()` is called more than once"),
])
def test_a_use_the_teardown_cannot_follow_is_refused(tail: str, why: str) -> None:
    script = SAVED + tail
    result = migrate_source(script, "fsdp", path="fit.py")
    assert result.new == script
    refusals = [f for f in result.findings if f.code == "MIG104"]
    assert len(refusals) == 1 and why in refusals[0].message, [f.message for f in result.findings]


def test_ddp_converts_a_use_the_teardown_cannot_follow_its_replicas_are_whole() -> None:
    script = SAVED + "    sys.exit(len(history))\n"
    result = migrate_source(script, "ddp", path="fit.py")
    assert result.new != script and "model.module.state_dict()" in result.new
    assert not [f for f in result.findings if f.code == "MIG104"]
