"""to-deepspeed on a script whose arguments a module of its folder parses (`from options import
get_args`, options.py calling `parser.parse_args()`): the conversion cannot teach that parser
`--local_rank`, so the launcher passes `--no_local_rank` (the script reads LOCAL_RANK), MIG601 names
the module's line, `migrate launch` re-makes the same launcher, and verify launches the same way.
Conversion and rendering only: nothing is launched."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from migrate.api import migrate_file
from migrate.launch import LaunchPlan, problems, render
from migrate.launch_command import launchable
from migrate.records import FileResult, Finding, Severity
from migrate.verify.session import VerifyOptions, convert, passes_no_local_rank

OPTIONS = """\
import argparse


def get_args():
    parser = argparse.ArgumentParser(description="a toy")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=8)
    return parser.parse_args()
"""

TRAIN = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from options import get_args


def main():
    args = get_args()
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


def project(tmp_path: Path, options: str = OPTIONS, train: str = TRAIN) -> Path:
    (tmp_path / "options.py").write_text(options)
    (tmp_path / "train.py").write_text(train)
    return tmp_path / "train.py"


def converted(script: Path, **options: object) -> FileResult:
    from migrate import DeepSpeedOptions

    result = migrate_file(str(script), "deepspeed", DeepSpeedOptions(**options) if options else None)  # type: ignore[arg-type]
    assert isinstance(result, FileResult), result
    return result


def launcher(result: FileResult) -> str:
    [text] = [a.text for a in result.artifacts if a.path.endswith(".sh")]
    return text


def test_a_parser_in_a_sibling_module_gets_a_launcher_that_passes_no_local_rank(tmp_path: Path) -> None:
    result = converted(project(tmp_path))
    [note] = [f for f in result.findings if f.code == "MIG601"]
    assert (note.line, note.col, note.severity) == (5, 1, Severity.WARNING)  # the script's import
    assert note.message.startswith("options.py:8:12 parses the command line")
    assert "deepspeed --no_local_rank train.py" in note.message
    text = launcher(result)
    assert "    --no_local_rank \\\n" in text
    assert text.index("--no_local_rank") < text.index('"$here"/train.py')  # the launcher's, not the script's
    assert "migrate launch deepspeed train.py --no-local-rank\n" in text
    assert "`migrate launch deepspeed train.py --no-local-rank --hosts host1:8,host2:8`" in text
    assert 'local_rank = int(os.environ["LOCAL_RANK"])' in result.new  # the script's own local rank
    assert "--local_rank" not in result.new  # the script has no parser to teach it


def test_migrate_launch_renders_the_same_launcher_from_its_re_make_words(tmp_path: Path) -> None:
    script = project(tmp_path)
    made = launcher(converted(script))
    words = shlex.split(made.split("re-make it (in this file's folder) with:\n#")[1].splitlines()[0])
    assert words[:4] == ["migrate", "launch", "deepspeed", "train.py"] and words[4:] == ["--no-local-rank"]
    [again] = render(LaunchPlan(target="deepspeed", launcher=launchable()["deepspeed"], script=str(script), no_local_rank=True))
    assert again.text == made


def test_several_hosts_pass_no_local_rank_too(tmp_path: Path) -> None:
    text = launcher(converted(project(tmp_path), hosts=("node1:2", "node2:2")))
    assert "    --no_local_rank \\\n    --hostfile" in text
    assert "--no-local-rank --hosts node1:2,node2:2\n" in text


@pytest.mark.parametrize("options", [
    OPTIONS.replace('    return parser.parse_args()', '    parser.add_argument("--local_rank", type=int)\n    return parser.parse_args()'),
    OPTIONS.replace("parser.parse_args()", "parser.parse_known_args()[0]"),
    OPTIONS.replace("parser.parse_args()", 'parser.parse_args(["--epochs", "1"])'),
], ids=["declares-local-rank", "parse-known-args", "own-argument-list"])
def test_a_sibling_parser_that_takes_the_launcher_s_argument_changes_nothing(tmp_path: Path, options: str) -> None:
    result = converted(project(tmp_path, options=options))
    assert not [f for f in result.findings if f.code == "MIG601"]
    assert "--no_local_rank" not in launcher(result)


def test_a_module_imported_as_a_package_member_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "__init__.py").write_text("")
    (tmp_path / "config" / "options.py").write_text(OPTIONS)
    (tmp_path / "train.py").write_text(TRAIN.replace("from options import get_args", "from config import options")
                                       .replace("get_args()", "options.get_args()"))
    [note] = [f for f in converted(tmp_path / "train.py").findings if f.code == "MIG601"]
    assert note.message.startswith("config/options.py:8:12 ")


def test_the_plan_flag_is_the_deepspeed_launcher_s_alone() -> None:
    [problem] = problems(LaunchPlan(target="ddp", launcher=launchable()["ddp"], script="train.py", no_local_rank=True))
    assert problem.flag == "--no-local-rank"
    [problem] = problems(LaunchPlan(target="deepspeed", launcher=launchable()["deepspeed"], script="train.py", scheduler="slurm", nproc_per_node="2",
                                    no_local_rank=True))
    assert problem.flag == "--no-local-rank"
    assert not problems(LaunchPlan(target="deepspeed", launcher=launchable()["deepspeed"], script="train.py", no_local_rank=True))


def test_verify_converts_with_the_user_s_modules_and_launches_with_the_flag(tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    script = project(tmp_path / "user")
    view = tmp_path / "work" / "converted" / "train.py"  # verify's converted view: no options.py there
    result = convert(str(script), script.read_text(), VerifyOptions(target="deepspeed"), str(view))
    assert passes_no_local_rank(result)
    plain = FileResult(path="train.py", old="", new="", findings=(Finding("MIG130", Severity.NOTE, "", 1, 1),))
    assert not passes_no_local_rank(plain)


EVALUATE_MAIN_FUNCTION = """\
import argparse


def score(model):
    return sum(p.numel() for p in model.parameters())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint")
    args = parser.parse_args()
    print(args.checkpoint)


if __name__ == "__main__":
    main()
"""

EVALUATE_MAIN_BLOCK = """\
import argparse


def score(model):
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint")
    print(parser.parse_args().checkpoint)
"""


@pytest.mark.parametrize("module", [EVALUATE_MAIN_FUNCTION, EVALUATE_MAIN_BLOCK], ids=["main-function", "main-block"])
def test_a_parser_that_runs_only_when_the_module_runs_alone_is_not_reported(tmp_path: Path, module: str) -> None:
    (tmp_path / "evaluate.py").write_text(module)
    train = TRAIN.replace("from options import get_args\n", "from evaluate import score\n").replace(
        "    args = get_args()\n", "").replace("args.batch_size", "8").replace("args.epochs", "1")
    result = converted(project(tmp_path, train=train))
    assert not [f for f in result.findings if f.code == "MIG601"], [f.message for f in result.findings]
    assert "--no_local_rank" not in launcher(result)


def test_a_module_whose_main_function_the_script_may_call_is_still_reported(tmp_path: Path) -> None:
    (tmp_path / "evaluate.py").write_text(EVALUATE_MAIN_FUNCTION)
    train = TRAIN.replace("from options import get_args\n", "import evaluate\n").replace(
        "    args = get_args()\n", "").replace("args.batch_size", "8").replace("args.epochs", "1")
    [note] = [f for f in converted(project(tmp_path, train=train)).findings if f.code == "MIG601"]
    assert note.message.startswith("evaluate.py:11:12 parses the command line")
