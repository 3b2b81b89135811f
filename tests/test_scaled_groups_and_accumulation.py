"""Two reviewer findings on real scripts, each pinned by conversions of small scripts:

- scale_lr (Horovod's default, --scale-lr elsewhere): parameter groups that set their own 'lr' have
  it scaled (lr= alone would change no group's rate), groups built elsewhere get a loop over
  `param_groups` after the optimizer is built, and MIG004 says which rates were scaled.
- analysis.accumulation: an accumulation count that is a parameter of the training function is
  followed to the caller that passes it, so Horovod gets backward_passes_per_step and DeepSpeed
  gradient_accumulation_steps from the caller's expression instead of refusing (MIG403/MIG116).
"""

from __future__ import annotations

from migrate import migrate_source
from migrate.steps.scale_lr import scale_lr, scale_lr_unless_declined
from tests.steps.helpers import run_step

GROUPS = """\
import torch
import torch.nn as nn


def main():
    body = nn.Linear(4, 4)
    head = nn.Linear(4, 1)
    optimizer = torch.optim.SGD([{"params": body.parameters(), "lr": 0.01}, {"params": head.parameters(), "lr": 0.2}],
                                lr=0.1, momentum=0.9)
    for x in torch.randn(3, 8, 4):
        optimizer.zero_grad()
        head(body(x)).sum().backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

ELSEWHERE = GROUPS.replace(
    '    optimizer = torch.optim.SGD([{"params": body.parameters(), "lr": 0.01}, {"params": head.parameters(), "lr": 0.2}],\n'
    "                                lr=0.1, momentum=0.9)\n",
    '    groups = [{"params": body.parameters(), "lr": 0.01}]\n'
    '    groups.append({"params": head.parameters()})\n'
    "    optimizer = torch.optim.SGD(groups, lr=0.1, momentum=0.9)\n"
    "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)\n")


def _horovod(code: str):  # type: ignore[no-untyped-def]
    return run_step(scale_lr_unless_declined, code, target="horovod")


def test_groups_with_their_own_rates_have_each_rate_scaled_and_lr_kept() -> None:
    result = _horovod(GROUPS)
    assert result.added == [
        '    optimizer = torch.optim.SGD([{"params": body.parameters(), "lr": 0.01 * hvd.size()}, '
        '{"params": head.parameters(), "lr": 0.2 * hvd.size()}],']
    assert result.codes == [("MIG004", 8)]
    message = result.findings[0].message
    assert message.startswith("the 'lr' of each of the 2 parameter groups is multiplied by hvd.size()")
    assert "lr= is kept" in message


def test_a_group_without_a_rate_of_its_own_has_lr_scaled_with_the_others() -> None:
    result = run_step(scale_lr, GROUPS.replace(', "lr": 0.2}', "}"), scale_lr=True)
    assert result.added == [
        '    optimizer = torch.optim.SGD([{"params": body.parameters(), "lr": 0.01 * dist.get_world_size()}, '
        '{"params": head.parameters()}],',
        "                                lr=0.1 * dist.get_world_size(), momentum=0.9)"]
    message = _horovod(GROUPS.replace(', "lr": 0.2}', "}")).findings[0].message
    assert message.startswith("the 'lr' of the 1 parameter group that sets one, and lr= (the rate of the 1 parameter "
                              "group without one), are multiplied by hvd.size()")


def test_a_group_that_may_set_its_rate_through_a_splat_is_scaled_after_the_optimizer_is_built() -> None:
    code = GROUPS.replace('{"params": head.parameters(), "lr": 0.2}', '{"params": head.parameters(), **extra}')
    result = run_step(scale_lr, code.replace("def main():", "def main(extra):"), scale_lr=True)
    assert "lr=0.1 * " not in result.text and '"lr": 0.01 * ' not in result.text
    assert result.added == ["    for group in optimizer.param_groups:  # each group's rate, scaled",
                            '        group["lr"] *= dist.get_world_size()']


def test_groups_built_elsewhere_are_scaled_by_a_loop_before_the_scheduler_reads_them() -> None:
    result = _horovod(ELSEWHERE)
    assert result.added == ["    for group in optimizer.param_groups:  # each group's rate, scaled",
                            '        group["lr"] *= hvd.size()']
    lines = result.text.splitlines()
    built = lines.index("    optimizer = torch.optim.SGD(groups, lr=0.1, momentum=0.9)")
    assert lines[built + 1].startswith("    for group in optimizer.param_groups")
    assert lines[built + 3].startswith("    scheduler = ")
    message = result.findings[0].message
    assert message.startswith("every parameter group's 'lr' is multiplied by hvd.size() right after `optimizer` is built")
    assert "(`groups`) are built elsewhere" in message


def test_groups_built_elsewhere_in_an_unassigned_optimizer_are_left_to_the_reader() -> None:
    code = ELSEWHERE.replace("optimizer = torch.optim.SGD(groups, lr=0.1, momentum=0.9)",
                             "optimizer = Lookahead(torch.optim.SGD(groups, lr=0.1, momentum=0.9))")
    result = _horovod(code.replace("import torch.nn as nn\n", "import torch.nn as nn\nfrom lookahead import Lookahead\n"))
    assert "    optimizer = Lookahead(torch.optim.SGD(groups, lr=0.1, momentum=0.9))\n" in result.text
    assert "param_groups" not in result.text
    assert [f.code for f in result.findings] == ["MIG004"]
    message = result.findings[0].message
    assert "multiplied by" not in message and "by hand" in message and "(`groups`)" in message


def test_a_one_cycle_schedule_with_a_rate_per_group_scales_each() -> None:
    code = ELSEWHERE.replace("torch.optim.lr_scheduler.StepLR(optimizer, 1)",
                             "torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=[0.05, 0.5], total_steps=3)")
    result = run_step(scale_lr, code, scale_lr=True)
    assert ("    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=[0.05 * dist.get_world_size(), "
            "0.5 * dist.get_world_size()], total_steps=3)") in result.added


ACCUMULATING = """\
import argparse
import torch
import torch.nn as nn


def fit(net, batches, opt, rounds, accumulation_steps=4):
    for _ in range(rounds):
        for i, (x, y) in enumerate(batches):
            loss = nn.functional.mse_loss(net(x), y) / accumulation_steps
            loss.backward()
            if (i + 1) % accumulation_steps == 0:
                opt.step()
                opt.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--accumulation-steps", type=int, default=2)
    args = parser.parse_args()
    net = nn.Linear(4, 2)
    batches = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 2)), batch_size=4)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    fit(net, batches, opt, 2, accumulation_steps=args.accumulation_steps)
"""


def _codes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.code for f in result.findings]


def _wrapped(result) -> str:  # type: ignore[no-untyped-def]
    return next(line.strip() for line in result.new.splitlines() if "hvd.DistributedOptimizer(" in line)


def test_horovod_takes_the_count_the_caller_passes() -> None:
    result = migrate_source(ACCUMULATING, "horovod")
    assert "MIG403" not in _codes(result)
    assert _wrapped(result) == ("opt = hvd.DistributedOptimizer(opt, named_parameters=net.named_parameters(), "
                                "backward_passes_per_step=args.accumulation_steps)")


def test_deepspeed_takes_the_count_the_caller_passes() -> None:
    result = migrate_source(ACCUMULATING, "deepspeed")
    assert "MIG116" not in _codes(result)
    assert '    ds_config["gradient_accumulation_steps"] = args.accumulation_steps\n' in result.new
    config = next(a.text for a in result.artifacts if a.path.endswith("ds_config.json"))
    assert '"gradient_accumulation_steps": 2,' in config  # the argparse default


def test_the_default_is_the_count_when_no_call_passes_one() -> None:
    result = migrate_source(ACCUMULATING.replace(", accumulation_steps=args.accumulation_steps)", ")"), "horovod")
    assert _wrapped(result).endswith("backward_passes_per_step=4)")


def test_callers_that_pass_different_counts_are_still_refused() -> None:
    code = ACCUMULATING + "    fit(net, batches, opt, 1, accumulation_steps=8)\n"
    assert "MIG403" in _codes(migrate_source(code, "horovod"))


def test_a_count_rebound_inside_the_function_is_still_refused() -> None:
    code = ACCUMULATING.replace("    for _ in range(rounds):\n",
                                "    accumulation_steps = max(1, accumulation_steps)\n    for _ in range(rounds):\n")
    assert "MIG403" in _codes(migrate_source(code, "horovod"))


def test_a_function_handed_on_uncalled_is_still_refused() -> None:
    code = ACCUMULATING + "    callbacks = [fit]\n"
    assert "MIG403" in _codes(migrate_source(code, "horovod"))


def test_an_optimizer_built_inside_the_function_reads_the_parameter() -> None:
    code = ACCUMULATING.replace("def fit(net, batches, opt, rounds, accumulation_steps=4):\n",
                                "def fit(net, batches, rounds, accumulation_steps=4):\n"
                                "    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)\n")
    code = code.replace("    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)\n    fit(net, batches, opt, 2,",
                        "    fit(net, batches, 2,")
    result = migrate_source(code, "horovod")
    assert _wrapped(result).endswith("backward_passes_per_step=accumulation_steps)")


def test_groups_built_elsewhere_that_set_no_rate_have_lr_scaled() -> None:
    code = ELSEWHERE.replace('    groups = [{"params": body.parameters(), "lr": 0.01}]\n'
                             '    groups.append({"params": head.parameters()})\n',
                             '    groups = [{"params": body.parameters(), "weight_decay": 0.01}, {"params": head.parameters()}]\n')
    result = _horovod(code)
    assert result.added == ["    optimizer = torch.optim.SGD(groups, lr=0.1 * hvd.size(), momentum=0.9)"]
    assert result.findings[0].message.startswith("the learning rate is multiplied by hvd.size()")
