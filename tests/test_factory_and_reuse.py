"""Two shapes a conversion once refused (issue 24):

- Horovod: optimizers built by a function of this file and returned as a tuple the caller unpacks
  (`g_opt, d_opt = make_optimizers(g, d, cfg)`) are followed to their constructions, wrapped right
  after the unpacking line with the caller's model names, and their learning rate scaled where they
  are built; DeepSpeed gives each model's engine its optimizer.
- A trained model handed back (`history, model = fit()`), saved, then the name bound to a fresh
  model in straight-line code: the save reads the wrapped model (DDP `.module`, a gather under FSDP
  and ZeRO), the load into the fresh one is left as the script wrote it. Under a loop the order
  is unclear: still MIG104.
Conversion only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate import migrate_source

CASES = Path(__file__).parent / "cases"
FACTORY = (CASES / "hvd_optimizer_factory_tuple" / "input.py").read_text()
REUSED = (CASES / "returned_model_name_reused" / "input.py").read_text()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_horovod_wraps_factory_optimizers_after_the_unpacking_line() -> None:
    result = migrate_source(FACTORY, "horovod", path="gan.py")
    lines = _lines(result.new)
    unpacked = lines.index("maker_opt, judge_opt = make_optimizers(maker, judge, settings)")
    assert set(lines[unpacked + 1:unpacked + 3]) == {
        'maker_opt = hvd.DistributedOptimizer(maker_opt, named_parameters=maker.named_parameters(prefix="maker"))',
        'judge_opt = hvd.DistributedOptimizer(judge_opt, named_parameters=judge.named_parameters(prefix="judge"))'}
    assert result.new.count('lr=settings["lr"] * hvd.size()') == 2  # scaled inside the factory
    assert "judge_opt.synchronize()" in result.new  # the maker's backward runs through judge
    assert not [f for f in result.findings if f.code == "MIG402"]


def test_horovod_follows_names_the_factory_returns() -> None:
    script = FACTORY.replace('''    return (optim.Adam(maker.parameters(), lr=settings["lr"], betas=(0.5, 0.999)),
            optim.Adam(judge.parameters(), lr=settings["lr"], betas=(0.5, 0.999)))''', '''    first = optim.Adam(maker.parameters(), lr=settings["lr"])
    second = optim.Adam(judge.parameters(), lr=settings["lr"])
    return first, second''')
    lines = _lines(migrate_source(script, "horovod", path="gan.py").new)
    assert 'judge_opt = hvd.DistributedOptimizer(judge_opt, named_parameters=judge.named_parameters(prefix="judge"))' in lines


def test_deepspeed_gives_each_engine_its_factory_optimizer() -> None:
    result = migrate_source(FACTORY, "deepspeed", path="gan.py")
    assert "maker, maker_opt, _, _ = deepspeed.initialize(model=maker, optimizer=maker_opt" in result.new
    assert not [f for f in result.findings if f.code in ("MIG113", "MIG104")]


@pytest.mark.parametrize(("target", "save"), [
    ("ddp", 'torch.save(model.module.state_dict(), "regressor.pt")'),
    ("fsdp", "model_state = get_model_state_dict(model"),
    ("deepspeed", "model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}"),
])
def test_a_name_bound_again_in_straight_line_code_converts(target: str, save: str) -> None:
    result = migrate_source(REUSED, target, path="fit.py")
    assert not [f for f in result.findings if f.code == "MIG104"], [f.message for f in result.findings]
    lines = _lines(result.new)
    saved = next(i for i, line in enumerate(lines) if line.startswith(save))
    fresh = lines.index('model = Regressor(SETTINGS["width"])')
    load = next(i for i, line in enumerate(lines) if line.startswith("model.load_state_dict(torch.load("))
    assert saved < fresh < load < lines.index("dist.destroy_process_group()")
    assert "set_model_state_dict" not in result.new and "model.module.load_state_dict" not in result.new


def test_a_rebinding_inside_a_loop_is_still_refused() -> None:
    script = REUSED.replace('''    torch.save(model.state_dict(), "regressor.pt")
    model = Regressor(SETTINGS["width"])''', '''    for _ in range(2):
        torch.save(model.state_dict(), "regressor.pt")
        model = Regressor(SETTINGS["width"])''')
    result = migrate_source(script, "ddp", path="fit.py")
    assert result.new == script
    assert [f.code for f in result.findings if f.code == "MIG104"] == ["MIG104"]
