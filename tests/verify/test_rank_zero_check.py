"""The rank_zero check: output of ranks other than 0 fails it, unless the conversion itself said it
left that print on every rank (MIG112), which makes it "expected" with the finding named."""

from __future__ import annotations

from migrate.records import Finding, Severity
from migrate.verify.checks import EXPECTED, FAILED, PASSED, Launch, RankRecord, Source, check_rank_zero

ORIGINAL = Source("train.py", "import torch\nmodel = Net()\nprint('man ->', translate('man'))\nprint('done')\n")
CONVERTED = Source("train.py", "import torch\nimport torch.distributed as dist\nmodel = DDP(Net())\n"
                               "print('man ->', translate('man'))\nif dist.get_rank() == 0:\n    print('done')\n")
LEFT = Finding("MIG112", Severity.WARNING, "this print computes a value that may need every rank; left printing on "
               "every rank", line=3, col=1)


def launch(*lines: int) -> Launch:
    printed = [{"kind": "print", "text": "man -> woman", "where": f"train.py:{line}"} for line in lines]
    records = {rank: RankRecord(rank=rank, events=[{"kind": "start", "root": "/w"}, *(printed if rank else [])], stack="")
               for rank in (0, 1)}
    return Launch(returncode=0, output="", records=records, timed_out=False, seconds=1.0, timeout=60.0)


def test_a_print_the_conversion_left_on_every_rank_is_expected_and_names_its_finding() -> None:
    check = check_rank_zero(launch(4), (LEFT,), CONVERTED, ORIGINAL)
    assert check.status == EXPECTED
    assert "rank 1 printed 'man -> woman' at train.py:4: `print('man ->', translate('man'))`" in check.detail
    assert check.detail[-1] == "expected: the conversion reported it (MIG112 line 3)"


def test_a_print_the_conversion_did_not_report_fails() -> None:
    check = check_rank_zero(launch(4, 6), (LEFT,), CONVERTED, ORIGINAL)
    assert check.status == FAILED
    assert any("train.py:6: `print('done')`" in line for line in check.detail)


def test_without_the_finding_the_same_print_fails() -> None:
    assert check_rank_zero(launch(4), (), CONVERTED, ORIGINAL).status == FAILED


def test_no_output_on_other_ranks_passes() -> None:
    assert check_rank_zero(launch(), (LEFT,), CONVERTED, ORIGINAL).status == PASSED
