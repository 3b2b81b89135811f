"""migrate.unused_imports: the imports a rewrite made unused go, and nothing else does."""

from __future__ import annotations

import ast

import pytest

from migrate.unused_imports import drop_imports_made_unused

AMP_IMPORT = "from torch.cuda.amp import GradScaler, autocast\n"
TRAIN = "import torch\n\nmodel = torch.nn.Linear(2, 2)\n"
# The original script: both amp names read.
OLD = AMP_IMPORT + TRAIN + "scaler = GradScaler()\nwith autocast():\n    loss = model(torch.ones(2)).sum()\nscaler.scale(loss).backward()\n"
# After to-deepspeed took over precision: neither is read any more.
NEW = AMP_IMPORT + TRAIN + "loss = model(torch.ones(2)).sum()\nmodel.backward(loss)\n"


def drop(old: str, new: str) -> str:
    """The function under test, with the properties every result must have."""
    result = drop_imports_made_unused(old, new)
    ast.parse(result)
    assert drop_imports_made_unused(old, result) == result, "not idempotent"
    return result


def test_both_amp_names_go_and_the_statement_with_them() -> None:
    assert drop(OLD, NEW) == TRAIN + "loss = model(torch.ones(2)).sum()\nmodel.backward(loss)\n"


def test_a_name_still_read_stays_in_the_statement() -> None:
    new = AMP_IMPORT + TRAIN + "with autocast():\n    loss = model(torch.ones(2)).sum()\n"
    assert drop(OLD, new) == "from torch.cuda.amp import autocast\n" + TRAIN + "with autocast():\n    loss = model(torch.ones(2)).sum()\n"


def test_the_first_name_still_read_keeps_its_place() -> None:
    new = AMP_IMPORT + "scaler = GradScaler()\n"
    assert drop(OLD, new) == "from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"


def test_a_parenthesized_multi_line_import_keeps_its_layout() -> None:
    imports = "from torch.cuda.amp import (\n    GradScaler,\n    autocast,\n    custom_fwd,\n)\n"
    old = imports + "GradScaler()\nautocast()\ncustom_fwd()\n"
    new = imports + "autocast()\n"
    assert drop(old, new) == "from torch.cuda.amp import (\n    autocast,\n)\nautocast()\n"


def test_a_parenthesized_import_without_trailing_comma_keeps_its_layout() -> None:
    imports = "from torch.cuda.amp import (\n    GradScaler,\n    autocast\n)\n"
    old = imports + "GradScaler()\nautocast()\n"
    assert drop(old, imports + "GradScaler()\n") == "from torch.cuda.amp import (\n    GradScaler\n)\nGradScaler()\n"


def test_an_alias_is_judged_by_the_name_it_binds() -> None:
    imports = "from torch.cuda.amp import GradScaler as Scaler, autocast as amp_autocast\n"
    old = imports + "Scaler()\namp_autocast()\n"
    new = imports + "amp_autocast()\n"
    assert drop(old, new) == "from torch.cuda.amp import autocast as amp_autocast\namp_autocast()\n"


def test_a_module_alias_goes_when_its_attribute_reads_vanished() -> None:
    old = "import torch\nimport torch.cuda.amp as amp\n\nscaler = amp.GradScaler()\nwith amp.autocast():\n    torch.ones(1)\n"
    new = "import torch\nimport torch.cuda.amp as amp\n\ntorch.ones(1)\n"
    assert drop(old, new) == "import torch\n\ntorch.ones(1)\n"


def test_import_of_a_submodule_binds_the_package_and_stays_while_it_is_read() -> None:
    old = "import torch.cuda.amp\nscaler = torch.cuda.amp.GradScaler()\nx = torch.ones(1)\n"
    new = "import torch.cuda.amp\nx = torch.ones(1)\n"
    assert drop(old, new) is new


def test_a_name_unused_in_the_original_stays() -> None:
    old = "import os\nfrom torch.cuda.amp import GradScaler\nGradScaler()\n"
    new = "import os\nfrom torch.cuda.amp import GradScaler\n"
    assert drop(old, new) == "import os\n"


def test_an_import_the_rewrite_added_stays_even_if_unused() -> None:
    old = "from torch.cuda.amp import autocast\nautocast()\n"
    new = "import deepspeed\nfrom torch.cuda.amp import autocast\n"
    assert drop(old, new) == "import deepspeed\n"


def test_the_same_name_imported_from_elsewhere_by_the_rewrite_stays() -> None:
    old = "from torch.cuda.amp import autocast\nautocast()\n"
    new = "from torch import autocast\n"
    assert drop(old, new) is new


def test_an_attribute_or_keyword_of_the_same_name_is_not_a_read() -> None:
    old = AMP_IMPORT + "GradScaler()\nautocast()\n"
    new = AMP_IMPORT + "scaler = torch.amp.GradScaler(autocast=True)\n"
    assert drop(old, new) == "scaler = torch.amp.GradScaler(autocast=True)\n"


def test_a_local_binding_of_the_name_counts_as_a_use() -> None:
    old = AMP_IMPORT + "GradScaler()\nautocast()\n"
    new = AMP_IMPORT + "def autocast():\n    pass\nGradScaler = None\n"
    assert drop(old, new) is new


@pytest.mark.parametrize("guard", [
    "try:\n    {imports}except ImportError:\n    GradScaler = autocast = None\n",
    "if TYPE_CHECKING:\n    {imports}",
    "if torch.cuda.is_available():\n    {imports}",
])
def test_imports_under_try_or_if_are_left_alone(guard: str) -> None:
    head = "import torch\nfrom typing import TYPE_CHECKING\n" + guard.format(imports=AMP_IMPORT)
    old = head + "GradScaler()\nautocast()\nTYPE_CHECKING\n"
    new = head + "TYPE_CHECKING\n"
    assert drop(old, new) is new


def test_a_future_import_is_never_removed() -> None:
    old = "from __future__ import annotations\nannotations = []\nprint(annotations)\n"
    new = "from __future__ import annotations\n"
    assert drop(old, new) is new


def test_a_class_body_import_is_left_alone() -> None:
    old = "class Amp:\n    from torch.cuda.amp import autocast\n    autocast()\n"
    new = "class Amp:\n    from torch.cuda.amp import autocast\n"
    assert drop(old, new) is new


def test_a_function_level_import_goes_from_its_function() -> None:
    old = "def train():\n    from torch.cuda.amp import GradScaler, autocast\n    with autocast():\n        return GradScaler()\n"
    new = "def train():\n    from torch.cuda.amp import GradScaler, autocast\n    return GradScaler()\n"
    assert drop(old, new) == "def train():\n    from torch.cuda.amp import GradScaler\n    return GradScaler()\n"


def test_a_function_body_is_never_left_empty() -> None:
    old = "def train():\n    from torch.cuda.amp import autocast\n    autocast()\n"
    new = "def train():\n    from torch.cuda.amp import autocast\n"
    assert drop(old, new) is new


@pytest.mark.parametrize("mention", [
    '__all__ = ["GradScaler", "autocast"]\n',
    '__all__ += ("GradScaler autocast",)\n',
    '__all__.extend(["GradScaler", "autocast"])\n',
    'def make() -> "tuple[GradScaler, autocast]":\n    pass\n',
    "from __future__ import annotations\ndef make(scaler: GradScaler, cast: autocast) -> None:\n    pass\n",
    "scaler: GradScaler | autocast\n",
    'scaler = typing.cast("GradScaler | autocast", None)\n',
    "scaler = None  # type: GradScaler | autocast\n",
    "def make():\n    global GradScaler, autocast\n",
])
def test_a_mention_in_all_annotations_or_global_keeps_the_import(mention: str) -> None:
    future = "from __future__ import annotations\n" if mention.startswith("from __future__") else ""
    mention = mention.removeprefix(future)
    old = future + AMP_IMPORT + "import typing\nGradScaler()\nautocast()\n" + mention
    new = future + AMP_IMPORT + "import typing\n" + mention
    assert drop(old, new) is new


@pytest.mark.parametrize("dynamic", [
    "names = globals()\n", "print(locals())\n", "print(vars())\n", 'eval("GradScaler")\n', 'exec("autocast()")\n',
    "def __getattr__(name):\n    return None\n", "from torch.cuda import *\n",
])
def test_a_dynamic_module_is_left_alone(dynamic: str) -> None:
    old = AMP_IMPORT + dynamic + "GradScaler()\nautocast()\n"
    new = AMP_IMPORT + dynamic
    assert drop(old, new) is new


def test_model_eval_is_not_eval() -> None:
    old = AMP_IMPORT + "model.eval()\nGradScaler()\nautocast()\n"
    assert drop(old, AMP_IMPORT + "model.eval()\n") == "model.eval()\n"


def test_a_comment_on_the_removed_alias_keeps_the_statement() -> None:
    imports = "from torch.cuda.amp import (\n    GradScaler,  # loss scaling for fp16\n    autocast,\n)\n"
    old = imports + "GradScaler()\nautocast()\n"
    new = imports + "autocast()\n"
    assert drop(old, new) is new


def test_a_comment_line_above_the_removed_alias_keeps_the_statement() -> None:
    imports = "from torch.cuda.amp import (\n    autocast,\n    # loss scaling for fp16\n    GradScaler,\n)\n"
    old = imports + "GradScaler()\nautocast()\n"
    new = imports + "autocast()\n"
    assert drop(old, new) is new


def test_comments_elsewhere_in_the_parentheses_stay() -> None:
    imports = "from torch.cuda.amp import (  # amp helpers\n    GradScaler,\n    # the context manager\n    autocast,\n)\n"
    old = imports + "GradScaler()\nautocast()\n"
    new = imports + "autocast()\n"
    assert drop(old, new) == "from torch.cuda.amp import (  # amp helpers\n    # the context manager\n    autocast,\n)\nautocast()\n"


def test_a_backslash_continued_import_is_joined() -> None:
    imports = "from torch.cuda.amp import GradScaler, \\\n    autocast\n"
    old = imports + "GradScaler()\nautocast()\n"
    assert drop(old, imports + "autocast()\n") == "from torch.cuda.amp import autocast\nautocast()\n"


def test_a_comment_on_the_kept_alias_stays() -> None:
    imports = "from torch.cuda.amp import (\n    GradScaler,  # loss scaling for fp16\n    autocast\n)\n"
    old = imports + "GradScaler()\nautocast()\n"
    new = imports + "GradScaler()\n"
    assert drop(old, new) == "from torch.cuda.amp import (\n    GradScaler  # loss scaling for fp16\n)\nGradScaler()\n"


def test_a_comment_at_the_end_of_a_line_that_would_go_keeps_the_line() -> None:
    imports = "from torch.cuda.amp import GradScaler, autocast  # mixed precision\n"
    old = imports + "GradScaler()\nautocast()\n"
    assert drop(old, imports) is imports
    assert drop(old, imports + "autocast()\n") == "from torch.cuda.amp import autocast  # mixed precision\nautocast()\n"


def test_a_comment_line_above_a_removed_import_is_kept() -> None:
    old = "import os\n\n# Mixed precision helpers.\n" + AMP_IMPORT + "\nimport torch\nGradScaler()\nautocast()\n"
    new = "import os\n\n# Mixed precision helpers.\n" + AMP_IMPORT + "\nimport torch\n"
    assert drop(old, new) == "import os\n\n# Mixed precision helpers.\n\nimport torch\n"


def test_blank_lines_around_a_removed_import_do_not_double() -> None:
    old = "import os\n\n" + AMP_IMPORT + "\n\ndef main():\n    GradScaler()\n    autocast()\n"
    new = "import os\n\n" + AMP_IMPORT + "\n\ndef main():\n    pass\n"
    assert drop(old, new) == "import os\n\n\ndef main():\n    pass\n"


def test_only_the_import_goes_from_a_semicolon_line() -> None:
    old = "import torch.cuda.amp as amp; x = 1\ny = 2; import torch.cuda.amp as amp2  # end\namp.autocast()\namp2.autocast()\n"
    new = "import torch.cuda.amp as amp; x = 1\ny = 2; import torch.cuda.amp as amp2  # end\n"
    assert drop(old, new) == "x = 1\ny = 2  # end\n"


def test_two_statements_in_a_row_both_go() -> None:
    old = "import os\n\nfrom torch.cuda.amp import GradScaler\nfrom torch.cuda.amp import autocast\n\nos.sep\nGradScaler()\nautocast()\n"
    new = "import os\n\nfrom torch.cuda.amp import GradScaler\nfrom torch.cuda.amp import autocast\n\nos.sep\n"
    assert drop(old, new) == "import os\n\nos.sep\n"


def test_windows_line_endings_are_kept() -> None:
    old = OLD.replace("\n", "\r\n")
    assert drop(old, NEW.replace("\n", "\r\n")) == drop(OLD, NEW).replace("\n", "\r\n")


def test_applying_it_twice_equals_applying_it_once() -> None:
    once = drop_imports_made_unused(OLD, NEW)
    assert once != NEW
    assert drop_imports_made_unused(OLD, once) == once
    assert drop_imports_made_unused(NEW, once) is once


def test_an_unchanged_text_is_returned_as_is() -> None:
    assert drop_imports_made_unused(OLD, OLD) is OLD
    new = OLD + "print('done')\n"
    assert drop_imports_made_unused(OLD, new) is new


def test_a_text_that_does_not_parse_is_returned_as_is() -> None:
    broken = AMP_IMPORT + "def (:\n"
    assert drop_imports_made_unused(OLD, broken) is broken
    assert drop_imports_made_unused(broken, NEW) is NEW


def test_the_deepspeed_rewrite_of_an_amp_script_loses_the_autocast_import() -> None:
    from migrate import migrate_source

    old = (AMP_IMPORT + "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
           "model = torch.nn.Linear(8, 1)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
           "loader = DataLoader(TensorDataset(torch.randn(16, 8), torch.randn(16, 1)), batch_size=4)\n"
           "scaler = GradScaler()\nfor x, y in loader:\n    optimizer.zero_grad()\n    with autocast():\n"
           "        loss = torch.nn.functional.mse_loss(model(x), y)\n    scaler.scale(loss).backward()\n"
           "    scaler.step(optimizer)\n    scaler.update()\n")
    new = migrate_source(old, "deepspeed").new
    read = {node.id for node in ast.walk(ast.parse(new)) if isinstance(node, ast.Name)}
    imported = {alias.asname or alias.name for node in ast.walk(ast.parse(drop(old, new)))
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert {"GradScaler", "autocast"} & imported == {"GradScaler", "autocast"} & read
