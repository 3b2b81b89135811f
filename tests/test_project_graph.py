"""The project's import graph (migrate/project.py) over in-memory folders, and the two findings it
words for a project whose training step lives in a module (tests/cases_projects/): MIG119 for the
module names the entry points that import it, with the command for each, and MIG002 for a module
that runs nothing when started names them too, never a module that has no entry point (issue 27).
An entry point whose step lives in its project is converted with it (tests/test_project_conversion.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrate import migrate_source
from migrate.api import migrate_paths
from migrate.project_files import ReadModule, read_from_disk
from migrate.records import FileResult
from migrate.project import (MAX_DEPTH, Graph, defining_module, importing_entry_points, is_entry_point, project_graph,
                             top_level_names)

PROJECTS = Path(__file__).parent / "cases_projects"

FOLDER = {
    "/p/train.py": ("import os.path\nimport torch\nfrom engine import fit, Meter\nimport pkg.models as models\n"
                    "from pkg import helpers, Net\nfrom torch.nn import functional\n\n"
                    "if __name__ == \"__main__\":\n    fit(Net())\n"),
    "/p/engine.py": "from utils import bar\n\n\ndef fit(model):\n    bar()\n\n\nclass Meter:\n    pass\n",
    "/p/utils.py": "def bar():\n    return 1\n",
    "/p/pkg/__init__.py": "from .models import Net\n",
    "/p/pkg/models.py": "from ..utils import bar\nfrom ...outside import thing\n\n\nclass Net:\n    pass\n",
    "/p/pkg/helpers.py": "def helper():\n    return 2\n",
    "/p/torch.py": None,
}


def _reader(files: dict[str, str | None], asked: list[str] | None = None):  # type: ignore[no-untyped-def]
    def read(path: str) -> str | None:
        if asked is not None:
            asked.append(path)
        return files.get(path)
    return read


def test_the_graph_follows_modules_packages_submodules_and_relative_imports() -> None:
    graph = project_graph("/p/train.py", _reader(FOLDER))
    assert graph.modules() == ["/p/engine.py", "/p/pkg/__init__.py", "/p/pkg/models.py", "/p/pkg/helpers.py",
                               "/p/utils.py"]
    direct = {(link.dotted, link.names, link.line) for link in graph.links_from("/p/train.py")}
    assert ("engine", ("fit", "Meter"), 3) in direct and ("pkg.models", (), 4) in direct
    assert ("pkg.helpers", (), 5) in direct and ("pkg", ("Net",), 5) in direct
    assert [link.dotted for link in graph.links_from("/p/pkg/models.py")] == ["utils"]
    assert graph.links_from("/p/engine.py")[0].text == "from utils import bar"
    assert [link.module for link in graph.chain_to("/p/utils.py")] == ["/p/engine.py", "/p/utils.py"]


def test_only_paths_under_the_root_are_asked_and_nothing_else_is_followed() -> None:
    asked: list[str] = []
    graph = project_graph("/p/train.py", _reader(FOLDER, asked))
    assert asked and all(path.startswith("/p/") for path in asked)
    assert not any("outside" in path for path in asked)  # `from ...outside import thing`: above the root
    assert not any(path.startswith("/p/os") for path in asked)  # the standard library: never looked for
    assert "/p/torch.py" in asked  # site-packages' names are asked under the root only
    assert not any(link.dotted.startswith(("torch", "os")) for link in graph.links)


def test_a_name_is_followed_through_a_package_that_re_exports_it() -> None:
    graph = project_graph("/p/train.py", _reader(FOLDER))
    assert defining_module(graph, "/p/train.py", "Net", _reader(FOLDER)) == "/p/pkg/models.py"
    assert defining_module(graph, "/p/train.py", "fit", _reader(FOLDER)) == "/p/engine.py"
    assert defining_module(graph, "/p/train.py", "functional", _reader(FOLDER)) is None


def test_loops_depth_and_unparsable_modules_end_the_walk() -> None:
    chain = {f"/c/m{i}.py": f"import m{i + 1}\n" for i in range(MAX_DEPTH + 5)}
    chain["/c/m0.py"] = "import m1\nimport m0\n"
    graph = project_graph("/c/m0.py", _reader(chain))
    assert len(graph.modules()) == MAX_DEPTH and "/c/m0.py" not in graph.modules()
    assert project_graph("/c/m0.py", _reader(chain), depth=2).modules() == ["/c/m1.py", "/c/m2.py"]
    looped = {"/l/a.py": "import b\n", "/l/b.py": "import a\n"}
    graph = project_graph("/l/a.py", _reader(looped))
    assert graph.modules() == ["/l/b.py"] and graph.links_from("/l/b.py")[0].module == "/l/a.py"
    broken = {"/b/a.py": "import b\n", "/b/b.py": "def (:\nimport c\n", "/b/c.py": ""}
    graph = project_graph("/b/a.py", _reader(broken))
    assert graph.modules() == ["/b/b.py"] and graph.unparsed == ("/b/b.py",)


def test_what_makes_an_entry_point() -> None:
    assert is_entry_point("def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n")
    assert is_entry_point("if '__main__' == __name__:\n    pass\n")
    assert is_entry_point("import torch\nfor step in range(3):\n    pass\n")
    assert is_entry_point("def main():\n    pass\n\nmain()\n")
    assert not is_entry_point("import warnings\nwarnings.filterwarnings('ignore')\n\ndef fit():\n    pass\n")
    assert not is_entry_point("if __name__ == 'engine':\n    pass\n") and not is_entry_point("def (:\n")


def test_the_entry_points_that_import_a_module_directly_or_not() -> None:
    folder = {
        "/q/engine.py": "def fit(model):\n    pass\n",
        "/q/recipes.py": "from engine import fit\n\n\ndef tune(model):\n    fit(model)\n",
        "/q/train.py": "import engine\n\nengine.fit(None)\n",
        "/q/tune.py": "from recipes import tune\n\nif __name__ == '__main__':\n    tune(None)\n",
        "/q/report.py": "import json\n\nif __name__ == '__main__':\n    print(json.dumps({}))\n",
        "/q/setup_logs.py": "import logging\nimport engine\n\nlogging.basicConfig()\n",
    }
    found = importing_entry_points("/q/engine.py", sorted(folder), _reader(folder))
    assert [each.path for each in found] == ["/q/train.py", "/q/tune.py"]  # recipes.py and setup_logs.py do not run
    assert found[0].describe("/q") == "train.py (line 1: `import engine`)"
    assert found[1].describe("/q") == "tune.py (line 1: `from recipes import tune`, through recipes.py)"
    assert importing_entry_points("/q/engine.py", sorted(folder), _reader(folder), limit=2) == []


def _alone(path: Path, target: str = "ddp") -> FileResult:
    """The file converted by itself (migrate_source, reading its folder from disk): what the command
    line converts through its one importer instead (MIG134, tests/test_project_conversion.py)."""
    return migrate_source(path.read_text(), target, path=str(path), read_module=read_from_disk)


def _one(path: Path, target: str = "ddp") -> FileResult:
    [result] = list(migrate_paths([str(path)], target))
    assert isinstance(result, FileResult) and result.new == result.old and len(result.findings) == 1
    return result


def test_the_module_names_its_entry_point_and_the_entry_point_does_not_send_back() -> None:
    folder = PROJECTS / "engine_loop"
    [mig119] = _alone(folder / "engine.py").findings
    assert mig119.code == "MIG119" and mig119.line == 8
    assert mig119.message.endswith(f"Left unchanged: it is imported by train.py (line 8: `from engine import "
                                   f"train_one_epoch`): run `migrate to-ddp {folder / 'train.py'}`, the script its "
                                   "training runs from")
    converted = [result.path for result in migrate_paths([str(folder / "train.py")], "ddp")]
    assert converted == [str(folder / "train.py"), str(folder / "utils.py")]  # converted with its project


def test_a_module_imported_by_two_entry_points_lists_both_with_their_commands() -> None:
    folder = PROJECTS / "two_entry_points"
    [mig119] = _one(folder / "engine.py", "fsdp").findings
    advice = mig119.message.split("Left unchanged: ")[1]
    assert advice == (f"it is imported by 2 entry points of its folder: finetune.py (line 5: `from recipes import "
                      f"finetune_head`, through recipes.py): run `migrate to-fsdp {folder / 'finetune.py'}`; train.py "
                      f"(line 5: `import engine`): run `migrate to-fsdp {folder / 'train.py'}`")
    [mig002] = _alone(folder / "recipes.py", "fsdp").findings
    assert mig002.code == "MIG002" and "it calls `fit(model, batches, optimizer, epochs)` (line 12)" in mig002.message
    assert mig002.message.endswith(f"left unchanged: it is imported by finetune.py (line 5: `from recipes import "
                                   f"finetune_head`): run `migrate to-fsdp {folder / 'finetune.py'}`")


def test_a_module_no_entry_point_imports_says_so(tmp_path: Path) -> None:
    engine = (PROJECTS / "engine_loop" / "engine.py").read_text()
    (tmp_path / "engine.py").write_text(engine.replace("from utils import RunningMean\n", ""))
    (tmp_path / "notes.py").write_text("if __name__ == '__main__':\n    print('no training here')\n")
    [mig119] = _one(tmp_path / "engine.py").findings
    assert "Left unchanged: no entry point of its folder imports it; to train on several processes" in mig119.message


def test_a_module_with_its_own_entry_point_is_named_as_the_one_to_convert() -> None:
    """engine.py runs when started (a module-level call of its own function; a trailing `__main__`
    demo alone would not make it an entry point: tests/test_project_conversion.py)."""
    files = {"/r/engine.py": ("import torch\n\n\ndef fit(model, opt):\n    model(torch.ones(1, 2)).sum().backward()\n"
                              "    opt.step()\n\n\ndef main():\n    net = torch.nn.Linear(2, 1)\n"
                              "    fit(net, torch.optim.SGD(net.parameters(), lr=0.1))\n\n\nmain()\n")}
    script = ("import torch\nimport engine\n\nnet = torch.nn.Linear(2, 1)\nfor _ in range(3):\n"
              "    engine.fit(net, None)\n")
    [mig002] = migrate_source(script, "ddp", path="/r/train.py", read_module=files.get).findings
    assert ("(move the training step into this file, or convert `engine.py`, which has an entry point of its own"
            in mig002.message)


def test_mig002_reads_the_one_walk_of_the_project_that_joining_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's project is walked once per conversion: join and MIG002's message read the same graph
    (analysis.program.project_walk)."""
    import migrate.analysis.program as program
    import migrate.project

    walked: list[str] = []
    walk = migrate.project.project_graph

    def counted(script: str, read: ReadModule, text: str | None = None, depth: int = MAX_DEPTH) -> Graph:
        walked.append(script)
        return walk(script, read, text, depth)

    monkeypatch.setattr(migrate.project, "project_graph", counted)  # for whoever imports it when called
    monkeypatch.setattr(program, "project_graph", counted)
    files = {"/w/engine.py": "def fit(model):\n    return model\n"}
    script = "import engine\n\nif __name__ == '__main__':\n    engine.fit(None)\n"
    [mig002] = migrate_source(script, "ddp", path="/w/train.py", read_module=files.get).findings
    assert mig002.code == "MIG002" and "here or in the modules of its folder it imports" in mig002.message
    assert walked == ["/w/train.py"]


def test_top_level_names_and_every_name_a_module_may_clash_on() -> None:
    tree = ast.parse("import os\nfrom a import b\ndef f():\n    inner = 1\nclass C:\n    pass\nx = 1\ny: int = 2\n"
                     "p, q = 1, 2\nz += 1\nos.sep = '/'\nif True:\n    hidden = 3\n")
    assert top_level_names(tree) == {"f", "C", "x", "y"}
    assert top_level_names(tree, every_target=True) == {"f", "C", "x", "y", "p", "q", "z", "os"}
