"""The checks on hand-made rank records: what each verdict rests on, without launching anything."""

from __future__ import annotations

from migrate.verify.checks import Launch, RankRecord, Source, check_data, check_steps, layout_problem

SOURCE = Source("train.py", "import torch\nloss = model(x)\noptimizer.step()\n")


def record(rank: int, *events: dict, stack: str = "") -> RankRecord:
    return RankRecord(rank=rank, events=[{"kind": "start", "rank": rank, "root": "/w"}, *events], stack=stack)


def launch(*records: RankRecord) -> Launch:
    return Launch(returncode=0, output="", records={r.rank: r for r in records}, timed_out=False)


def steps(n: int) -> list[dict]:
    return [{"kind": "step", "n": i + 1, "params": {}} for i in range(n)]


def test_a_script_that_ends_by_itself_with_fewer_steps_is_not_a_failure() -> None:
    """Each rank has half the data: a one-epoch script takes half the steps."""
    ranks = [record(r, *steps(2), {"kind": "end", "outcome": "finished", "steps": 2}) for r in (0, 1)]
    check = check_steps(launch(*ranks), 2, 3, SOURCE)
    assert check.status == "passed"
    assert "ended by itself" in check.detail[0]


def test_a_rank_stopped_short_is_a_failure_with_its_line() -> None:
    stack = 'Timeout (0:00:10)!\nThread 0x1 (most recent call first):\n  File "/w/train.py", line 2 in main\n'
    ranks = [record(0, *steps(3), {"kind": "end", "outcome": "stopped", "steps": 3}), record(1, *steps(1), stack=stack)]
    check = check_steps(launch(*ranks), 2, 3, SOURCE)
    assert check.status == "failed"
    assert check.detail == ["rank 1 reached 1 of 3 steps; it was at train.py:2: `loss = model(x)` (in main) when it was stopped"]


def test_identical_inputs_are_expected_when_the_conversion_said_so() -> None:
    from migrate.findings import finding

    same = {"kind": "input", "step": 1, "model": "Net", "digest": "abc", "where": "train.py:2"}
    ranks = [record(r, same) for r in (0, 1)]
    assert check_data(launch(*ranks), 2, (), SOURCE).status == "failed"
    reported = (finding("MIG101", "batches are built by hand", 2, 5),)
    assert check_data(launch(*ranks), 2, reported, SOURCE).status == "expected"


def test_checkpoint_layouts() -> None:
    model = {"fc.weight": [2, 2, "torch.float32"], "fc.bias": [2, "torch.float32"]}
    prefixed = {f"module.{k}": v for k, v in model.items()}
    assert layout_problem(model, [model]) == ""
    assert "carry the wrapper's `module.` prefix" in layout_problem(prefixed, [model])
    assert "nn.DataParallel's `module.` prefix" in layout_problem(model, [prefixed])
    assert "missing ['fc.bias']" in layout_problem({"fc.weight": model["fc.weight"]}, [model])
    assert layout_problem({"step": [1, "torch.int64"]}, [model]) == ""  # not a model's state dict
