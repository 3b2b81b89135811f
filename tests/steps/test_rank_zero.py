"""rank_zero: prints, checkpoints and files opened for writing run on rank 0 only; a print whose
value may run the model is computed on every rank first, or left and reported."""

from __future__ import annotations

from migrate.steps.rank_zero import rank_zero
from tests.steps.helpers import run_step

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
        torch.save(model.state_dict(), "model.pt")
    with open("done.txt", "w") as f:
        f.write("ok")


if __name__ == "__main__":
    print("starting")
    main()
"""

QUIET = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with open("labels.txt") as f:
        labels = f.read()


if __name__ == "__main__":
    main()
"""

PRINTS_AN_EVALUATION = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, x, y):
    return nn.functional.mse_loss(model(x), y).item()


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(evaluate(model, x, y), flush=True)
    print("validation", evaluate(model, x, y))


if __name__ == "__main__":
    main()
"""


def test_output_and_checkpoints_run_on_rank_zero() -> None:
    result = run_step(rank_zero, SCRIPT)
    expected_epoch_end = (
        "            optimizer.step()\n"
        "        if dist.get_rank() == 0:\n"
        '            print(f"epoch {epoch}: loss {loss.item():.4f}")\n'
        '            torch.save(model.state_dict(), "model.pt")\n'
        "    if dist.get_rank() == 0:\n"
        '        with open("done.txt", "w") as f:\n'
        '            f.write("ok")\n'
    )
    assert expected_epoch_end in result.text
    assert result.imports == ["import os", "import torch.distributed as dist"]
    assert result.findings == ()


def test_a_print_before_setup_asks_the_launcher_for_the_rank() -> None:
    """`print("starting")` runs before main() sets the process group up: dist.get_rank() would raise there."""
    result = run_step(rank_zero, SCRIPT)
    assert (
        'if __name__ == "__main__":\n'
        '    if os.environ.get("RANK", "0") == "0":\n'
        '        print("starting")\n'
        "    main()\n"
    ) in result.text


def test_a_script_that_writes_nothing_is_left_as_it_is() -> None:
    """Reading a file and collecting losses in a list is not output."""
    result = run_step(rank_zero, QUIET)
    assert result.text == result.source
    assert result.findings == ()


def test_a_print_that_runs_the_model_is_computed_on_every_rank() -> None:
    result = run_step(rank_zero, PRINTS_AN_EVALUATION)
    assert result.removed == ["    print(evaluate(model, x, y), flush=True)", '    print("validation", evaluate(model, x, y))']
    assert result.added == [
        "    message = evaluate(model, x, y)  # computed on every rank: it may run the model",
        "    if dist.get_rank() == 0:",
        "        print(message, flush=True)",
        # several values: only the one that may run the model is computed first
        "    message = evaluate(model, x, y)  # computed on every rank: it may run the model",
        "    if dist.get_rank() == 0:",
        '        print("validation", message)',
    ]
    assert result.codes == []


def test_a_print_of_unpacked_values_that_run_the_model_is_left_on_every_rank_and_said() -> None:
    result = run_step(rank_zero, PRINTS_AN_EVALUATION.replace('print("validation", evaluate(model, x, y))',
                                                              'print(*evaluate(model, x, y))'))
    assert "    print(*evaluate(model, x, y))\n" in result.text
    assert result.codes == [("MIG112", 20)]
