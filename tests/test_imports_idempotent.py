"""Imports the conversion adds or reuses, and conversions that must be no-ops the second time.

Each test is the smallest shape of a bug found by hand or by benchmarks/fuzz.py: new code read a
name before the import that binds it ran (a late `import os`, an import inside another function,
a new import placed below module-level setup), a script's own variable shadowed a new import, or
a converted script was not recognised as converted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from migrate import migrate_source
from migrate.unbound import introduced_unbound_names

LOOP = """\
    for step in range(10):
        loss = model(torch.randn(8, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def converted(code: str, target: str = "ddp") -> str:
    """The converted text, checked for what every conversion must give: no error, code that
    compiles, no name read before it is bound, and a second conversion that changes nothing."""
    result = migrate_source(code, target)
    assert not result.error, result.findings
    assert result.new != code
    compile(result.new, "train.py", "exec")
    assert introduced_unbound_names(code, result.new) == []
    again = migrate_source(result.new, target)
    assert again.skipped and again.new == result.new
    assert [f.code for f in again.findings] == ["MIG001"]
    return result.new


def test_a_late_module_level_import_is_not_reused_by_setup_above_it() -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\nmodel = nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        + LOOP.replace("    ", "", 1).replace("\n    ", "\n")
        + "import os\nprint(os.getcwd())\n"
    )
    new = converted(code)
    assert new.index("import os\n") < new.index("os.environ.setdefault")
    assert new.count("import os\n") == 2  # the script's own late one stays where it was


def test_new_imports_go_above_module_level_setup_not_after_a_later_import() -> None:
    """`import os` after `args = parser.parse_args()` but before the loop: setup goes right after
    parse_args, so the new imports must go above it, not after that later import."""
    code = (
        "import argparse\nimport torch\nimport torch.nn as nn\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--lr', type=float, default=0.1)\nargs = parser.parse_args()\n"
        "model = nn.Linear(4, 1)\nimport os\nprint(os.getcwd())\n"
        "opt = torch.optim.SGD(model.parameters(), lr=args.lr)\n"
        "for step in range(10):\n    loss = model(torch.randn(8, 4)).sum()\n    opt.zero_grad()\n"
        "    loss.backward()\n    opt.step()\n"
    )
    new = converted(code)
    assert new.index("import torch.distributed as dist") < new.index("dist.init_process_group")


def test_a_late_argparse_import_above_the_main_guard_converts_once(tmp_path: Path) -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef main(args):\n    model = nn.Linear(4, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=args.lr)\n" + LOOP + "\n\nimport argparse\n"
        'if __name__ == "__main__":\n    parser = argparse.ArgumentParser()\n'
        '    parser.add_argument("--lr", type=float, default=0.1)\n    args = parser.parse_args()\n    main(args)\n'
    )
    converted(code)
    script = tmp_path / "train.py"
    script.write_text(code)
    cli = [sys.executable, "-m", "migrate", "to-ddp"]
    assert subprocess.run([*cli, "--write", "train.py"], cwd=tmp_path, capture_output=True).returncode == 0
    assert script.read_text() != code
    check = subprocess.run([*cli, "--check", "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_distributed_import_below_its_use_counts_as_already_distributed() -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef main():\n    dist.init_process_group('gloo')\n"
        "    model = nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n" + LOOP
        + "\n\nimport torch.distributed as dist\nif __name__ == '__main__':\n    main()\n"
    )
    result = migrate_source(code, "ddp")
    assert result.skipped and result.new == code
    assert [f.code for f in result.findings] == ["MIG001"]


def test_an_import_inside_another_function_is_not_reused() -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef save(model):\n    import os\n"
        "    os.makedirs('out', exist_ok=True)\n    torch.save(model.state_dict(), 'out/model.pt')\n\n\n"
        "def main():\n    model = nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n" + LOOP
        + "    save(model)\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    new = converted(code)
    assert new.startswith("import os as os_\n")  # `os` is also save()'s own local name
    assert "os_.environ.setdefault" in new


def test_a_variable_named_like_a_new_import_does_not_shadow_it() -> None:
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef main():\n    dist = 0.5\n    model = nn.Linear(4, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=dist)\n" + LOOP + "\n\nif __name__ == '__main__':\n    main()\n"
    )
    new = converted(code)
    assert "import torch.distributed as dist_\n" in new
    assert "dist_.init_process_group(" in new and "dist = 0.5" in new


def test_an_import_of_the_entry_function_after_setup_is_not_read_before_it_runs() -> None:
    """`import os` late in main() makes `os` local to all of main(): setup at its top must not read it."""
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef main():\n    model = nn.Linear(4, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n" + LOOP
        + "    import os\n    print(os.getcwd())\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    converted(code)


def test_new_imports_go_above_setup_when_the_script_has_no_top_import_block() -> None:
    """The first statement is an `if` holding the imports: setup goes before it, so the new
    imports (torch among them: the script's own is not bound yet) must come first."""
    code = (
        "if True:\n    import torch\nfrom torch import nn\nmodel = nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(10):\n    loss = model(torch.randn(8, 4)).sum()\n    opt.zero_grad()\n"
        "    loss.backward()\n    opt.step()\n"
    )
    new = converted(code)
    assert new.startswith("import os\nimport torch\nimport torch.distributed as dist\n")


def test_deepspeed_removes_only_zero_grad_from_a_line_that_also_steps() -> None:
    """`opt.zero_grad(); loss.backward(); opt.step()`: the whole line went, training with it."""
    code = (
        "import torch\nimport torch.nn as nn\n\n\ndef main():\n    model = nn.Linear(4, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for step in range(10):\n"
        "        loss = model(torch.randn(8, 4)).sum()\n        opt.zero_grad(); loss.backward(); opt.step()\n"
        "    for step in range(3): opt.zero_grad(); print(step)\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    new = converted(code, "deepspeed")
    assert "        model.backward(loss); model.step()\n" in new
    assert "zero_grad" not in new
    assert "        if dist.get_rank() == 0:\n            print(step)\n" in new


def test_a_dataset_is_named_in_place_when_its_line_binds_what_it_reads_first() -> None:
    """`y = ...; loader = DataLoader(TensorDataset(x, y))`: a line above would read `y` unbound."""
    code = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, TensorDataset\n\n\n"
        "def main():\n    x = torch.randn(64, 4)\n"
        "    y = torch.randn(64, 1); loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)\n"
        "    model = nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for epoch in range(2):\n        for xb, yb in loader:\n"
        "            loss = nn.functional.mse_loss(model(xb), yb)\n            opt.zero_grad()\n"
        "            loss.backward()\n            opt.step()\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    new = converted(code)
    assert "DataLoader((train_dataset := TensorDataset(x, y)), batch_size=8, sampler=DistributedSampler(train_dataset" in new


SAME_NAMES = '''\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, shuffle=True)


def warm_up():
    def run_loop():
        for (x,) in loader:
            loss = model(x).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    run_loop()


def train():
    def run_loop():
        for (x,) in loader:
            loss = model(x).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    run_loop()


if __name__ == "__main__":
    warm_up()
    train()
'''


def test_deepspeed_keeps_the_steps_of_two_functions_of_one_name_apart() -> None:
    """Two nested `run_loop()`s: backward was looked up by function name, so both steps went to one loop."""
    new = converted(SAME_NAMES, "deepspeed")
    warm_up, train = new.split("def train():")
    assert warm_up.count("model.step()") == 1 and train.count("model.step()") == 1


LOADER_AFTER_ENGINE = '''\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model):
    loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=per_step)
    return sum(model(x).sum().item() for (x,) in loader)


model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
per_step = 8
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=per_step, shuffle=True)
for (x,) in loader:
    loss = model(x).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''


def test_deepspeed_does_not_read_a_loader_bound_only_in_a_function_above() -> None:
    """evaluate()'s own `loader` is no binding of the module's, which comes after the engine."""
    result = migrate_source(LOADER_AFTER_ENGINE, "deepspeed")
    assert not result.error, result.findings
    assert "loader.batch_size" not in converted(LOADER_AFTER_ENGINE, "deepspeed")
    assert "MIG116" in [f.code for f in result.findings]  # ds_config.json fixes the batch size instead
