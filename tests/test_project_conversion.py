"""A script whose training step lives in modules of its own project is converted with them (issue 27):
one diff over several files, each edited where the behaviour lives, written as one unit, idempotent;
refused (MIG133) when a module it would edit is imported by another entry point too.

The projects are tests/cases_projects/ (read as a reviewer: see its README), copied into a temporary
folder for each test that writes. The real multi-process runs of these projects are in
tests/equivalence/test_projects.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.api import migrate_paths
from migrate.records import FileResult

PROJECTS = Path(__file__).parent / "cases_projects"


def _copy(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(PROJECTS / name, folder)
    return folder


def _results(path: Path, target: str) -> dict[str, FileResult]:
    results = {}
    for outcome in migrate_paths([str(path)], target):
        assert isinstance(outcome, FileResult), outcome
        results[Path(outcome.path).name] = outcome
    return results


def _added(result: FileResult) -> list[str]:
    old = result.old.splitlines()
    return [line.strip() for line in result.new.splitlines() if line not in old]


def test_ddp_shards_the_loader_where_a_helper_builds_it_and_prints_once() -> None:
    results = _results(PROJECTS / "engine_loop" / "train.py", "ddp")
    assert list(results) == ["train.py", "utils.py"]  # engine.py needs nothing under DDP
    train, utils = results["train.py"], results["utils.py"]
    assert "model = DDP(model)" in _added(train) and "loader.sampler.set_epoch(epoch)" in _added(train)
    assert ("return DataLoader(train_dataset, batch_size=batch_size, sampler=DistributedSampler(train_dataset, "
            "shuffle=True))") in _added(utils)
    # say(): the helper that prints, guarded by a test true without a process group (a single-process
    # caller, a DataLoader worker started by spawn): the launcher's RANK
    assert 'if os.environ.get("RANK", "0") == "0":' in _added(utils) and "import os" in _added(utils)
    assert "import torch.distributed as dist" not in _added(utils)
    assert "import torch.distributed as dist" in _added(train)
    [note] = utils.findings
    assert (note.code, note.line) == ("MIG132", 1)
    assert note.message == ("edited with train.py, the entry point that imports it, as one program: no other entry "
                            "point of its folder imports it")


def test_deepspeed_edits_the_step_in_the_engine_module() -> None:
    results = _results(PROJECTS / "engine_loop" / "train.py", "deepspeed")
    assert list(results) == ["train.py", "engine.py", "utils.py"]
    engine = results["engine.py"]
    removed = [line.strip() for line in engine.old.splitlines() if line not in engine.new.splitlines()]
    assert removed == ["optimizer.zero_grad()", "loss.backward()", "optimizer.step()"]
    assert "model.backward(loss)" in _added(engine) and "model.step()" in _added(engine)
    assert any(artifact.path.endswith("ds_config.json") for artifact in results["train.py"].artifacts)


def test_a_finding_in_a_module_points_at_its_own_line(tmp_path: Path) -> None:
    results = _results(PROJECTS / "two_entry_points" / "train.py", "ddp")
    engine = results["engine.py"]
    assert engine.new == engine.old  # reported, not edited: it stays right for finetune.py too
    [mig101] = engine.findings
    assert (mig101.code, mig101.line, mig101.col) == ("MIG101", 8, 9)  # `for inputs, targets in batches:`
    assert "`batches`" in mig101.message


def test_write_is_one_unit_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    folder = _copy("engine_loop", tmp_path)
    before = {name: (folder / name).read_text() for name in ("train.py", "engine.py", "utils.py")}
    command = [sys.executable, "-m", "migrate", "to-deepspeed", "train.py"]
    written = subprocess.run([*command, "--write"], cwd=folder, capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    after = {name: (folder / name).read_text() for name in before}
    assert all(after[name] != before[name] for name in before)
    assert (folder / "ds_config.json").exists() and (folder / "run_train_deepspeed.sh").exists()
    again = subprocess.run([*command, "--check"], cwd=folder, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr  # nothing would change
    assert {name: (folder / name).read_text() for name in before} == after


def test_a_module_another_entry_point_imports_is_not_edited(tmp_path: Path) -> None:
    folder = _copy("engine_loop", tmp_path)
    (folder / "report.py").write_text('from utils import say\n\nif __name__ == "__main__":\n    say("report")\n')
    results = _results(folder / "train.py", "ddp")
    [train] = results.values()
    assert train.skipped and train.new == train.old and not train.modules
    [mig133] = train.findings
    assert mig133.code == "MIG133"
    assert ("the conversion edits `utils.py` (the training step or what it changes lives there), which other entry "
            "points of the folder import too: report.py (line 1: `from utils import say`)") in mig133.message


def _engine_loop_with_demo(tmp_path: Path, demo: str) -> tuple[Path, dict[str, FileResult]]:
    """The engine_loop project with `demo` appended to its utils.py, converted to DDP."""
    folder = _copy("engine_loop", tmp_path)
    (folder / "utils.py").write_text((folder / "utils.py").read_text() + demo)
    return folder, _results(folder / "train.py", "ddp")


def test_a_module_with_its_own_demo_is_edited_and_its_demo_kept(tmp_path: Path) -> None:
    """utils.py ends with a demo of its own that runs neither make_loader nor say: the module is
    edited with the script (the loader sharded where it is built), the demo written back byte for
    byte, the note says the demo was considered, and a second run changes nothing."""
    demo = ('\n\nif __name__ == "__main__":\n    mean = RunningMean()\n    mean.add(2.0)\n'
            '    print("demo:", mean.value())\n')
    folder, results = _engine_loop_with_demo(tmp_path, demo)
    utils = results["utils.py"]
    assert "sampler=DistributedSampler(train_dataset, shuffle=True)" in utils.new
    assert utils.new.endswith(demo) and 'print("demo:", mean.value())' not in _added(utils)
    [note] = utils.findings
    assert note.message.endswith("no other entry point of its folder imports it; its own `__main__` block (line 31) "
                                 "runs nothing the conversion made need the launcher")
    assert utils.old.splitlines()[30] == 'if __name__ == "__main__":'
    written = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "train.py", "--write"], cwd=folder,
                             capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    assert (folder / "utils.py").read_text() == utils.new
    again = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "train.py", "--check"], cwd=folder,
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_module_whose_demo_runs_an_edited_function_is_not_edited(tmp_path: Path) -> None:
    """The demo calls `preview()`, which calls make_loader: sharded, the demo would need the
    launcher's process group. The script is converted without utils.py, and MIG137 says why, on the
    line that imports it; the loader left unsharded is named (MIG101)."""
    demo = ('\n\ndef preview():\n    return next(iter(make_loader(8, 4)))\n\n\n'
            'if __name__ == "__main__":\n    print(preview()[0].shape)\n')
    _, results = _engine_loop_with_demo(tmp_path, demo)
    train = results["train.py"]
    assert "utils.py" not in results and "model = DDP(model)" in _added(train)
    assert [each.code for each in results["engine.py"].findings] == ["MIG101"]
    assert results["engine.py"].new == results["engine.py"].old
    [mig137] = [each for each in train.findings if each.code == "MIG137"]
    assert train.old.splitlines()[mig137.line - 1] == "from utils import make_loader, say"
    assert mig137.message.startswith("`utils.py` (imported here) was not converted with this script: its own "
                                     "`__main__` block (line 35) runs `make_loader`, which the conversion would edit")


def test_the_folder_run_lists_each_module_once(tmp_path: Path) -> None:
    folder = _copy("engine_loop", tmp_path)
    results = list(migrate_paths([str(folder)], "ddp"))
    names = [Path(r.path).name for r in results if isinstance(r, FileResult)]
    assert names == ["train.py", "utils.py"]  # engine.py found alone converts through train.py: listed once
    utils = next(r for r in results if isinstance(r, FileResult) and r.path.endswith("utils.py"))
    assert utils.changed and not utils.skipped  # the edit, not the module's own MIG119


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod", "deepspeed"])
def test_every_target_converts_both_projects_and_compiles(target: str) -> None:
    for script in (PROJECTS / "engine_loop" / "train.py", PROJECTS / "two_entry_points" / "train.py"):
        results = _results(script, target)
        train = results["train.py"]
        if target == "deepspeed" and script.parent.name == "two_entry_points":
            # the engine takes the step: engine.py would change under finetune.py too
            assert train.skipped and [f.code for f in train.findings] == ["MIG133"]
            continue
        assert train.changed and not train.error, train.findings
        for result in results.values():
            compile(result.new, result.path, "exec")


def test_fsdp_shards_above_the_call_that_builds_the_optimizer_for_a_trainer_class() -> None:
    # `Trainer(model, torch.optim.Adam(model.parameters()))`: the optimizer is built before __init__
    # runs, so a shard in __init__ would leave it holding the unsharded weights (it never learned)
    results = _results(PROJECTS / "trainer_class" / "train.py", "fsdp")
    train = results["train.py"].new.splitlines()
    shard = train.index("    fully_shard(model, mesh=device_mesh)")
    assert train[shard + 1] == "    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=0.01))"
    assert "fully_shard" not in results["trainer.py"].new


def test_ddp_wraps_the_model_where_the_trainer_keeps_it() -> None:
    results = _results(PROJECTS / "trainer_class" / "train.py", "ddp")
    trainer = results["trainer.py"]
    assert _added(trainer) == ["import os", "from torch.nn.parallel import DistributedDataParallel as DDP",
                               "self.model = DDP(self.model)", 'if os.environ.get("RANK", "0") == "0":',
                               'print(f"epoch {epoch} loss {loss.item():.5f}")']
    assert "torch.save(trainer.model.module.state_dict(), args.save)" in _added(results["train.py"])


def test_a_module_named_alone_is_converted_through_its_one_entry_point() -> None:
    # engine.py alone has no entry point; train.py is the one script of its folder that imports it
    results = _results(PROJECTS / "engine_loop" / "engine.py", "ddp")
    assert list(results) == ["train.py", "utils.py"]
    note = results["train.py"].findings[0]
    assert note.code == "MIG134" and note.message == (
        "converted through train.py (line 8: `from engine import train_one_epoch`), the one entry point of its folder "
        "that imports engine.py: launch that script")
    # recipes.py only calls the step; finetune.py is the one entry point that imports it
    results = _results(PROJECTS / "two_entry_points" / "recipes.py", "ddp")
    assert results["finetune.py"].findings[0].code == "MIG134" and results["recipes.py"].changed


def test_a_module_two_entry_points_import_is_not_converted_alone() -> None:
    [engine] = _results(PROJECTS / "two_entry_points" / "engine.py", "ddp").values()
    assert engine.skipped and [f.code for f in engine.findings] == ["MIG119"]


def test_a_module_keeps_its_header_comments_above_new_imports() -> None:
    from migrate.analysis.program import _program

    engine = "# -*- coding: utf-8 -*-\n# licence line\nimport torch\n\n\ndef fit():\n    pass\n"
    program = _program("/p/train.py", "import engine\nengine.fit()\n", [("/p/engine.py", "engine", engine)])
    assert program is not None
    part = program.parts[1]
    assert part.module.code == engine and len(part.module.header) == 2
    assert program.place(part.first_line + 3) == (part, 3)  # `import torch`, below the header's sentinel


def test_line_numbers_in_messages_name_the_file_that_holds_them() -> None:
    from migrate.analysis.program import _program
    from migrate.project_conversion import _lines_named

    program = _program("/p/train.py", "a = 1\nb = 2\nc = 3\n", [("/p/engine.py", "engine", "x = 1\ny = 2\n")])
    assert program is not None
    script, engine = program.parts
    # the script's three lines and its sentinel, then engine.py's header sentinel, its two lines
    assert (engine.first_line, engine.last_line) == (5, 7)
    assert _lines_named("see line 2 and lines 6, 7", program, script, "/p") == "see line 2 and lines 1, 2 of engine.py"
    assert _lines_named("lines 6-7 (line 3)", program, engine, "/p") == "lines 1-2 (line 3 of train.py)"


def test_the_pull_request_description_launches_the_script_only() -> None:
    described = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "train.py", "--report", "markdown"],
                               cwd=PROJECTS / "step_in_engine", capture_output=True, text=True)
    headings = [line for line in described.stderr.splitlines() if line.startswith("### ")]
    assert headings == ["### `train.py` (converted)", "### `checkpoint.py` (converted)", "### `data.py` (converted)"]
    assert described.stderr.count("\nLaunch") == 1  # the modules are launched through train.py


def test_a_script_of_module_level_code_is_torn_down_at_its_own_end() -> None:
    # the program's last statement is a module's: teardown still ends the script
    results = _results(PROJECTS / "two_entry_points" / "train.py", "ddp")
    assert results["train.py"].new.rstrip().endswith("dist.destroy_process_group()")
    assert all("destroy_process_group" not in r.new for name, r in results.items() if name != "train.py")


def test_a_module_whose_names_collide_is_named_not_silently_skipped(tmp_path: Path) -> None:
    folder = _copy("step_in_engine", tmp_path)
    # a second engine that defines `train_one_epoch` too: both cannot be read as one program
    (folder / "fast_engine.py").write_text("def train_one_epoch(model, loader, optimizer):\n"
                                           "    print('fast')\n    return 0.0\n")
    train = folder / "train.py"
    train.write_text(train.read_text().replace("import engine\n", "import engine\nimport fast_engine\n"))
    [mig135] = [f for f in _results(train, "ddp")["train.py"].findings if f.code == "MIG135"]
    assert (mig135.line, mig135.col) == (10, 1)  # `import fast_engine`
    assert mig135.message.startswith("`fast_engine.py` (imported here) was not read with this script: it binds "
                                     "`train_one_epoch` at its top level")


@pytest.mark.slow
def test_two_entry_points_of_one_engine_convert_once_and_each_still_runs_as_one_process(tmp_path: Path) -> None:
    # engine.py is imported by train.py and (through recipes.py) by finetune.py: the folder run
    # converts both scripts, leaves engine.py as it is (right for both), and a second run changes nothing
    folder = _copy("two_entry_points", tmp_path)
    engine = (folder / "engine.py").read_text()
    command = [sys.executable, "-m", "migrate", "to-ddp", "."]
    written = subprocess.run([*command, "--write"], cwd=folder, capture_output=True, text=True)
    assert written.returncode == 0, written.stdout + written.stderr
    assert (folder / "engine.py").read_text() == engine
    assert "init_process_group" in (folder / "train.py").read_text()
    assert "init_process_group" in (folder / "finetune.py").read_text()
    assert "model.module[-1]" in (folder / "recipes.py").read_text()  # finetune's own module, routed
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    for script in ("train.py", "finetune.py"):  # one process each, as `python script.py`
        ran = subprocess.run([sys.executable, script], cwd=folder, capture_output=True, text=True, env=env)
        assert ran.returncode == 0, ran.stderr[-2000:]
    assert (folder / "regressor_tuned.pt").exists()
    files = {p.name: p.read_text() for p in folder.glob("*.py")}
    again = subprocess.run([*command, "--check"], cwd=folder, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {p.name: p.read_text() for p in folder.glob("*.py")} == files


def test_a_script_that_star_imports_its_helpers_still_gets_its_own_imports(tmp_path: Path) -> None:
    # a star import binds every name for the unbound check: the script's new names must still be imported
    (tmp_path / "helpers.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n\n"
        "def make_loader():\n    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))\n"
        "    return DataLoader(data, batch_size=8, shuffle=True)\n\n\n"
        "def save_weights(model, path):\n    torch.save(model.state_dict(), path)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom helpers import *\n\nif __name__ == '__main__':\n    model = torch.nn.Linear(4, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x, y in make_loader():\n"
        "        loss = torch.nn.functional.mse_loss(model(x), y)\n        optimizer.zero_grad()\n"
        "        loss.backward()\n        optimizer.step()\n    save_weights(model, 'w.pt')\n")
    results = _results(tmp_path / "train.py", "ddp")
    added = _added(results["train.py"])
    assert "import os" in added and "import torch.distributed as dist" in added
    assert "from torch.nn.parallel import DistributedDataParallel as DDP" in added
    assert 'if os.environ.get("RANK", "0") == "0":' in _added(results["helpers.py"])


def test_a_module_s_plain_cuda_call_is_left_as_it_is(tmp_path: Path) -> None:
    # setup's set_device makes `.cuda()` the rank's GPU: a module's own `.cuda()` needs no edit
    (tmp_path / "losses.py").write_text("def to_gpu(t, use_gpu):\n    return t.cuda() if use_gpu else t\n\n\n"
                                        "def report(value):\n    print(value)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom losses import report, to_gpu\n\nif __name__ == '__main__':\n"
        "    model = torch.nn.Linear(4, 1)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for step in range(3):\n        x = to_gpu(torch.randn(8, 4), False)\n        loss = model(x).pow(2).mean()\n"
        "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        report(loss.item())\n")
    losses = _results(tmp_path / "train.py", "ddp")["losses.py"]
    assert "return t.cuda() if use_gpu else t" in losses.new  # only report()'s print is guarded
    assert _added(losses) == ["import os", 'if os.environ.get("RANK", "0") == "0":', "print(value)"]


def test_horovod_asks_hvd_for_the_local_rank_inside_a_module(tmp_path: Path) -> None:
    # horovodrun over MPI sets no HOROVOD_LOCAL_RANK: a module's function, called after hvd.init(), asks hvd
    folder = _copy("step_in_engine", tmp_path)
    (folder / "data.py").write_text((folder / "data.py").read_text().replace(
        "def make_loader(batch_size):\n",
        "def fetch(path):\n    import urllib.request\n    urllib.request.urlretrieve('https://example.org/x.pt', path)\n\n\n"
        "def make_loader(batch_size):\n    fetch('x.pt')\n"))
    data = _results(folder / "train.py", "horovod")["data.py"]
    assert "if hvd.local_rank() == 0:" in data.new and "HOROVOD_LOCAL_RANK" not in data.new



def test_a_class_of_a_module_named_by_new_code_is_imported_past_a_star_import(tmp_path: Path) -> None:
    # FSDP shards each `Block` of nets.py; the script star-imports nets, so the unbound check sees
    # `Block` bound: the script still imports it by name
    (tmp_path / "nets.py").write_text(
        "import torch\n\n\nclass Block(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.layer = torch.nn.Linear(8, 8)\n\n    def forward(self, x):\n        return torch.relu(self.layer(x))\n\n\n"
        "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])\n        print('built')\n\n"
        "    def forward(self, x):\n        for block in self.blocks:\n            x = block(x)\n        return x\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom nets import *\n\nif __name__ == '__main__':\n    model = Net()\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for step in range(3):\n"
        "        loss = model(torch.randn(4, 8)).pow(2).mean()\n        optimizer.zero_grad()\n"
        "        loss.backward()\n        optimizer.step()\n")
    train = _results(tmp_path / "train.py", "fsdp")["train.py"]
    assert "isinstance(submodule, Block)" in train.new and "from nets import Block" in _added(train)


def test_a_module_s_progress_bar_is_disabled_by_the_launcher_s_rank(tmp_path: Path) -> None:
    # like its guards, a module's tqdm(disable=...) reads RANK: no process group needed (a worker, one process)
    folder = _copy("step_in_engine", tmp_path)
    (folder / "engine.py").write_text((folder / "engine.py").read_text()
                                      .replace("from torch.nn import functional\n", "from torch.nn import functional\nfrom tqdm import tqdm\n")
                                      .replace("for inputs, labels in loader:", "for inputs, labels in tqdm(loader):"))
    engine = _results(folder / "train.py", "ddp")["engine.py"]
    assert 'for inputs, labels in tqdm(loader, disable=os.environ.get("RANK", "0") != "0"):' in engine.new
    assert "torch.distributed" not in engine.new
