"""A script that wraps its model in nn.DataParallel and then hands the wrapper to a helper
(`patch_replication_callback(model)`, sync-BN's) or reads `model.module` before the new wrap:
the wrap goes, and with it what only made sense on it (steps/wrap_model.py).

- a helper for nn.DataParallel only (named for it, asserting it, patching `.replicate`; in this
  file or in a module of the script's folder) is dropped with the wrap, and MIG003 says so;
- a helper that reads what only the wrapper has (`x.module`) refuses the file (MIG104 at its call);
- a helper that works on any module is kept;
- `model.module` before the new wrap loses `.module` in every branch, and MIG003 names each line.
"""

from __future__ import annotations

import pytest

from migrate import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
{imports}

{helper}

def main(resume, cuda):
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
{wrap}    if resume:
        state = torch.load(resume)
        if cuda:
            model.module.load_state_dict(state)
        else:
            model.load_state_dict(state)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main("", False)
"""

UNDER_CUDA = """\
    if cuda:
        model = nn.DataParallel(model)
        {call}
        model = model.cuda()
"""

ASSERTING = '''\
def hook_batchnorm(wrapped):
    """Hooks each copy's BatchNorm to the first."""
    assert isinstance(wrapped, nn.DataParallel)
    wrapped.hooked = True
'''

STRIPPED = '{key.removeprefix("module."): value for key, value in state.items()}'


def convert(target: str, helper: str = ASSERTING, call: str = "hook_batchnorm(model)", imports: str = "",
            wrap: str = UNDER_CUDA, files: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    code = SCRIPT.format(imports=imports, helper=helper, wrap=wrap.format(call=call))
    known = {f"/project/{name}": text for name, text in (files or {}).items()}
    return migrate_source(code, target, path="/project/train.py", read_module=known.get)


def line_of(result, text: str, nth: int = 1) -> int:  # type: ignore[no-untyped-def]
    """The line of the script where `text` occurs for the `nth` time."""
    return [number for number, line in enumerate(result.old.splitlines(), 1) if text in line][nth - 1]


def mig003(result) -> str:  # type: ignore[no-untyped-def]
    return next(f.message for f in result.findings if f.code == "MIG003")


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod"])
def test_a_helper_that_asserts_data_parallel_goes_with_the_wrap(target: str) -> None:
    result = convert(target)
    assert "hook_batchnorm(model)" not in result.new and "def hook_batchnorm(wrapped):" in result.new
    assert "nn.DataParallel(model)" not in result.new
    line = line_of(result, "        hook_batchnorm(model)")
    assert (f"`hook_batchnorm(model)` (line {line}) goes with it: its body asserts that it is handed an nn.DataParallel"
            in mig003(result))


@pytest.mark.parametrize("target", ["ddp", "fsdp", "horovod"])
def test_module_is_dropped_in_every_branch_that_loads_before_the_wrap(target: str) -> None:
    result = convert(target)
    assert "model.module" not in result.new
    loads = [line.strip() for line in result.new.splitlines() if "load_state_dict(" in line]
    assert len(loads) == 2  # the `if cuda:` load and the `else:` one, both into the module itself
    first, second = line_of(result, "load_state_dict(state)"), line_of(result, "load_state_dict(state)", 2)
    assert f"`model.module` on line {first} reads the model before the new wrap" in mig003(result)
    if target != "fsdp":  # FSDP's loads are rewritten by its own step (set_model_state_dict)
        assert loads == [f"model.load_state_dict({STRIPPED})"] * 2
        assert f"the loads on lines {first}, {second}" in mig003(result)


def test_a_helper_of_the_project_that_patches_replicate_goes() -> None:
    module = "def hook_copies(net):\n    original = net.replicate\n    net.replicate = lambda *a: original(*a)\n"
    result = convert("ddp", helper="", call="hook_copies(model)", imports="from sync.hooks import hook_copies",
                     files={"sync/hooks.py": module})
    assert "hook_copies(model)" not in result.new
    assert "its body patches `net.replicate`, which only nn.DataParallel has" in mig003(result)


def test_a_helper_named_for_data_parallel_goes_though_its_body_is_not_read() -> None:
    result = convert("ddp", helper="", call="patch_replication_callback(model)",
                     imports="from encoding.parallel import patch_replication_callback")
    assert "patch_replication_callback(model)" not in result.new
    assert "its name says it is for nn.DataParallel" in mig003(result)


def test_a_helper_that_reads_the_wrapper_s_module_refuses_the_file() -> None:
    helper = "def freeze_stem(wrapped):\n    wrapped.module[0].requires_grad_(False)\n"
    result = convert("ddp", helper=helper, call="freeze_stem(model)")
    assert result.new == result.old  # left unchanged
    refusal = next(f for f in result.findings if f.code == "MIG104")
    assert refusal.line == line_of(result, "freeze_stem(model)") and "`freeze_stem(model)` is handed the nn.DataParallel of `model`" in refusal.message
    assert "it reads `wrapped.module`, which only the wrapper has" in refusal.message


def test_a_helper_for_any_module_is_kept() -> None:
    helper = "def count(net):\n    print(sum(p.numel() for p in net.parameters()))\n"
    result = convert("ddp", helper=helper, call="count(model)")
    assert "        count(model)\n" in result.new
    assert "count(model)" not in mig003(result) and not [f for f in result.findings if f.code == "MIG104"]


@pytest.mark.parametrize("target", ["ddp", "horovod"])
def test_an_if_left_with_nothing_but_the_wrap_and_the_helper_goes_whole(target: str) -> None:
    wrap = ("    if cuda:\n        model = model.cuda()\n    if torch.cuda.device_count() > 1:\n"
            "        model = nn.DataParallel(model)\n        {call}\n")
    result = convert(target, wrap=wrap)
    assert "device_count" not in result.new and "pass" not in result.new
    assert "hook_batchnorm(model)" not in result.new and "model.module" not in result.new
    assert "    if cuda:\n        model = model.to(device)\n    if resume:\n" in result.new
