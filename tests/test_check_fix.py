"""`migrate check --fix`: DC202, DC203 and DC801 repaired in the text (migrate.check.fix), the
fixed text checking clean and a second fix changing nothing; the command writes all files or none
and names the user's file when it cannot."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from migrate.check import check_source
from migrate.check.fix import fix_source
from migrate.check_command import check

BROKEN = '''import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def setup():
    dist.init_process_group("gloo")


def main():
    setup()
    ds = list(range(8))
    model = DDP(torch.nn.Linear(1, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(ds, sampler=DistributedSampler(ds), shuffle=True)
    for epoch in range(3):
        for x in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    return model


if __name__ == "__main__":
    main()
'''
FIXED = BROKEN.replace(", shuffle=True)", ")").replace(
    "    for epoch in range(3):\n", "    for epoch in range(3):\n        loader.sampler.set_epoch(epoch)\n").replace(
    "    return model\n", "    dist.destroy_process_group()\n    return model\n")


def test_fix_repairs_each_finding_checks_clean_and_is_idempotent():
    assert sorted(v.code for v in check_source(BROKEN)) == ["DC202", "DC203", "DC801"]
    new, done = fix_source(BROKEN)
    assert new == FIXED
    assert [(line, code) for line, _, code, _ in done] == [(9, "DC801"), (17, "DC203"), (17, "DC202")]
    assert check_source(new) == []
    assert fix_source(new) == (new, [])


def test_destroy_goes_at_the_end_of_a_module_level_script_and_only_chosen_codes_are_fixed():
    script = "import torch.distributed as dist\ndist.init_process_group('gloo')\nx = 1\n"
    assert fix_source(script)[0] == script + "dist.destroy_process_group()\n"
    assert fix_source(BROKEN, codes=("DC202",))[0] == BROKEN.replace(", shuffle=True)", ")")


def test_a_shape_the_edit_cannot_take_is_left_for_the_check_to_report():
    positional = "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n" \
                 "loader = DataLoader([1], 1, True, sampler=object())\n"
    assert fix_source(positional) == (positional, [])


def app() -> typer.Typer:
    made = typer.Typer()
    made.command("check")(check)
    made.command("other")(lambda: None)
    return made


def test_the_command_writes_prints_each_repair_and_then_checks(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_bytes(BROKEN.replace("\n", "\r\n").encode())
    result = CliRunner().invoke(app(), ["check", "--fix", str(script)])
    assert result.exit_code == 0, result.output
    assert f"{script}:17:69: fixed DC202 dropped shuffle=True" in result.stderr
    assert "All checks passed (1 file)." in result.stderr
    assert script.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_the_command_writes_nothing_when_a_file_cannot_be_parsed(tmp_path: Path):
    good, bad = tmp_path / "a.py", tmp_path / "b.py"
    good.write_text(BROKEN)
    bad.write_text("def f(:\n")
    result = CliRunner().invoke(app(), ["check", "--fix", str(good), str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{bad}:1:7: syntax error:")
    assert "--fix wrote nothing" in result.stderr
    assert good.read_text() == BROKEN
