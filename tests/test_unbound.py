"""migrate.unbound: names a rewrite reads before they are bound, and only those it introduced."""

from __future__ import annotations

import pytest

from migrate import migrate_source
from migrate.unbound import introduced_unbound_names


def names(old: str, new: str) -> list[str]:
    return [name for name, _line, _col in introduced_unbound_names(old, new)]


def test_a_module_level_read_above_the_import_is_reported_with_its_position() -> None:
    new = "x = 1\nprint(os.getcwd())\nimport os\n"
    assert introduced_unbound_names("x = 1\nimport os\n", new) == [("os", 2, 7)]


def test_a_read_after_the_binding_is_fine() -> None:
    assert names("", "import os\nprint(os.sep)\nif True:\n    import sys\nprint(sys.argv)\n") == []


def test_a_binding_in_any_branch_counts_from_there_on() -> None:
    new = "try:\n    import yaml\nexcept ImportError:\n    yaml = None\nprint(yaml)\nfor i in range(2):\n    pass\nprint(i)\n"
    assert names("", new) == []


def test_builtins_and_module_dunders_are_always_bound() -> None:
    assert names("", "print(len(__file__), __name__)\n") == []


def test_what_the_original_already_read_unbound_is_not_reported() -> None:
    old = "for i in range(3):\n    if i:\n        print(last)\n    last = i\n"
    new = "import os\n" + old
    assert names(old, new) == []


def test_function_bodies_run_later_but_their_defaults_and_decorators_run_now() -> None:
    new = "def f(x=limit):\n    return later\nlimit = later = 1\n"
    assert names("", new) == ["limit"]


def test_a_function_local_read_before_its_binding_is_reported() -> None:
    old = "def main():\n    x = 1\n    import os\n    print(os.sep)\n"
    new = "def main():\n    print(os.environ)\n    x = 1\n    import os\n    print(os.sep)\n"
    assert names(old, new) == ["os"]


def test_a_global_read_in_a_function_that_nothing_binds_is_reported() -> None:
    old = "import torch\ndef main():\n    return torch.zeros(1)\n"
    new = "import torch\ndef main():\n    dist.barrier()\n    return torch.zeros(1)\n"
    assert names(old, new) == ["dist"]


def test_globals_bound_later_at_module_level_are_fine_in_function_bodies() -> None:
    assert names("", "def main():\n    return os.sep\nimport os\n") == []


def test_comprehension_and_lambda_variables_are_their_own() -> None:
    new = "squares = [n * n for n in range(3) if n]\nf = lambda a: a + b\nb = 2\n"
    assert names("", new) == []


def test_a_star_import_binds_everything_after_it() -> None:
    assert names("", "from os.path import *\nprint(join('a', 'b'))\ndef f():\n    return sep\n") == []


def test_global_in_a_function_binds_the_name_once_it_is_defined() -> None:
    assert names("", "def setup():\n    global cfg\n    cfg = 1\nsetup()\nprint(cfg)\n") == []


def test_text_that_does_not_parse_reports_nothing() -> None:
    assert names("x = 1\n", "def (:\n") == []


def test_migrate_source_refuses_a_rewrite_that_reads_a_name_before_it_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wired after the compile check: a MIG901 error result, the file left as it was."""
    import migrate.unbound

    code = (
        "import torch\nmodel = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    opt.zero_grad()\n    model(torch.randn(4, 2)).sum().backward()\n    opt.step()\n"
    )
    monkeypatch.setattr(migrate.unbound, "introduced_unbound_names", lambda old, new: [("os", 6, 5)])
    result = migrate_source(code, "ddp")
    assert result.error and result.new == code
    assert [f.code for f in result.findings] == ["MIG901"]
    assert "reads `os` (line 6) before it is bound" in result.findings[0].message


def test_a_walrus_binds_its_name_for_what_comes_after_it_in_the_same_statement() -> None:
    assert names("", "f = print\nf((d := 1), key=d)\n") == []
    assert names("", "f = print\nf(d, (d := 1))\n") == ["d"]


def test_module_level_names_are_the_names_a_file_binds_by_name_at_module_level() -> None:
    from migrate.unbound import module_level_names

    text = ("import os.path\nfrom a import b as c\nfrom d import *\ndef f():\n    inner = 1\nclass K:\n    attr = 2\n"
            "x = 1\nos.environ['k'] = v\ntry:\n    import yaml\nexcept ImportError as error:\n    yaml = None\n"
            "for i in range(2):\n    pass\nwith open('f') as handle:\n    pass\n")
    assert module_level_names(text) == {"os", "c", "f", "K", "x", "yaml", "error", "i", "handle"}
    assert module_level_names("def (:\n") == set()
