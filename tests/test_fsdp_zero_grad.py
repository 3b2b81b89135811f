"""`model.zero_grad()` under FSDP2 (steps/fsdp_zero_grad.py): after a forward, FSDP2 keeps the root's
gathered weights, and zero_grad() would clear those copies instead of the sharded gradients the
optimizer steps (tests/equivalence/test_fsdp_module_zero_grad.py runs it). `model.reshard()` goes
above it where a forward may have run since the last backward, also where a DDP script is swapped
to FSDP; not where the model runs only below it, in its own block. Conversion only."""

from __future__ import annotations

from migrate import migrate_source

RESHARD = "model.reshard()  # FSDP2 keeps the gathered weights after a forward: zero_grad() must clear the sharded gradients"

SCRIPT = """\
import torch
import torch.nn as nn


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 2))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    for epoch in range(2):
        for x, y in loader:
            STEP


if __name__ == "__main__":
    main()
"""

BETWEEN = """loss = nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            optimizer.step()"""

FIRST = """model.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()"""


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_a_zero_grad_between_the_forward_and_its_backward_reshards_first() -> None:
    new = lines(migrate_source(SCRIPT.replace("STEP", BETWEEN), "fsdp", path="train.py").new)
    assert new[new.index("model.zero_grad()") - 1] == RESHARD


def test_a_zero_grad_before_the_only_forward_is_left_as_it_is() -> None:
    new = migrate_source(SCRIPT.replace("STEP", FIRST), "fsdp", path="train.py").new
    assert "reshard()" not in new


def test_an_evaluation_handed_the_model_makes_the_first_zero_grad_reshard() -> None:
    script = SCRIPT.replace("STEP", FIRST).replace("    for epoch in range(2):\n",
                                                   "    for epoch in range(2):\n        evaluate(model)\n")
    script = script.replace("def main():", "def evaluate(net):\n    with torch.no_grad():\n"
                                           "        net(torch.randn(2, 4))\n\n\ndef main():")
    new = lines(migrate_source(script, "fsdp", path="train.py").new)
    assert new[new.index("model.zero_grad()") - 1] == RESHARD


def test_a_ddp_script_swapped_to_fsdp_reshards_too() -> None:
    script = SCRIPT.replace("STEP", BETWEEN).replace("import torch\n", "import torch\nimport torch.distributed as dist\n"
                                                     "from torch.nn.parallel import DistributedDataParallel as DDP\n", 1)
    script = script.replace("    model = nn.Linear(4, 2)\n", "    dist.init_process_group(\"gloo\")\n    model = nn.Linear(4, 2)\n"
                                                             "    model = DDP(model)\n")
    result = migrate_source(script, "fsdp", path="train.py")
    assert "MIG305" in {f.code for f in result.findings}
    new = lines(result.new)
    assert new[new.index("model.zero_grad()") - 1] == RESHARD
