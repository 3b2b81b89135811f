"""engine_calls (after deepspeed_engine, which creates the engine it rewrites to): backward and
the optimizer step go through the engine; zero_grad, GradScaler and clipping go, since the engine
and ds_config.json do that (an autocast block of the config's precision stays); with accumulation
the engine steps after every backward, on the script's own boundaries (test_engine_calls_windows)."""

from __future__ import annotations

from migrate.steps.deepspeed_engine import deepspeed_engine
from migrate.steps.engine_calls import engine_calls
from tests.steps.helpers import run_step, run_steps

AMP = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()


if __name__ == "__main__":
    main()
"""

ACCUMULATING = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y) / 4
        loss.backward()
        if (i + 1) % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""

BOTH = [deepspeed_engine, engine_calls]


def test_without_an_engine_nothing_changes() -> None:
    """Run alone (or after deepspeed_engine refused the file) there is no engine to call."""
    result = run_step(engine_calls, AMP, target="deepspeed")
    assert result.text == result.source
    assert result.findings == ()


def test_the_engine_takes_over_scaling_clipping_and_the_step() -> None:
    result = run_steps(BOTH, AMP, target="deepspeed", zero=0)  # float16 under ZeRO adds a MIG126 (test_engine_calls_windows)
    loop = (
        "    for x, y in loader:\n"
        '        with torch.autocast("cuda"):\n'
        "            loss = nn.functional.mse_loss(model(x), y)\n"
        "        model.backward(loss)\n"
        "        model.step()\n"
        "        scheduler.step()\n"
    )
    assert loop in result.text
    assert "GradScaler" not in result.text
    assert result.findings == ()


def test_a_scaler_the_script_still_reads_is_kept_and_reported() -> None:
    script = AMP.replace("        scheduler.step()\n", '        scheduler.step()\n    print("scale", scaler.get_scale())\n')
    result = run_steps(BOTH, script, target="deepspeed", zero=0)
    assert "    scaler = torch.cuda.amp.GradScaler()\n" in result.text
    assert result.codes == [("MIG004", 22)]


def test_with_accumulation_the_engine_steps_after_every_backward() -> None:
    """The engine counts micro-steps itself (gradient_accumulation_steps); the script's own
    `loss / 4` stays, so the engine must not scale again."""
    result = run_steps(BOTH, ACCUMULATING, target="deepspeed")
    loop = (
        "    for i, (x, y) in enumerate(loader):\n"
        "        loss = nn.functional.mse_loss(model(x), y) / 4\n"
        "        # the engine steps the optimizer when the script's own test holds (its own count runs on across epochs)\n"
        "        model.set_gradient_accumulation_boundary((i + 1) % 4 == 0)\n"
        "        model.backward(loss, scale_wrt_gas=False)\n"
        "        model.step()\n"
        "\n\n"
        'if __name__ == "__main__":\n'
    )
    assert loop in result.text
    assert result.findings == ()


def test_a_profilers_step_is_left_alone() -> None:
    script = AMP.replace("    for x, y in loader:\n", "    prof = torch.profiler.profile()\n    for x, y in loader:\n").replace(
        "        scheduler.step()\n", "        scheduler.step()\n        prof.step()\n")
    result = run_steps(BOTH, script, target="deepspeed", zero=0)
    assert "        model.step()\n        scheduler.step()\n        prof.step()\n" in result.text
    assert result.text.count("model.step()") == 1


PLAIN = AMP.replace("    scaler = torch.cuda.amp.GradScaler()\n", "").replace(
    '        with torch.autocast("cuda"):\n            loss', "        loss").replace(
    "        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n"
    "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        scaler.step(optimizer)\n"
    "        scaler.update()\n", "        loss.backward(BACKWARD_ARGUMENTS)\n        optimizer.step()\n")


def test_backward_keeps_retain_graph_and_a_given_gradient_weights_the_loss() -> None:
    """engine.backward(loss) takes a scalar loss and retain_graph: `loss.backward(minus_one)`
    becomes `(loss * minus_one).sum()`, whose gradients are the same; nothing is dropped."""
    for given, expected in [
        ("retain_graph=True", "model.backward(loss, retain_graph=True)"),
        ("minus_one", "model.backward((loss * minus_one).sum())"),
        ("gradient=minus_one, retain_graph=keep", "model.backward((loss * minus_one).sum(), retain_graph=keep)"),
        ("None, True", "model.backward(loss, retain_graph=True)"),
    ]:
        result = run_steps(BOTH, PLAIN.replace("BACKWARD_ARGUMENTS", given), target="deepspeed")
        assert f"        {expected}\n        model.step()\n" in result.text, result.text
        assert result.findings == ()


def test_backward_given_what_the_engine_cannot_take_is_reported() -> None:
    result = run_steps(BOTH, PLAIN.replace("BACKWARD_ARGUMENTS", "inputs=[model.weight]"), target="deepspeed")
    assert result.refused and result.codes == [("MIG117", 14)]
    assert "passes `inputs=[model.weight]`, which DeepSpeed's engine.backward(loss) does not take; the file is left " \
        "unchanged" in result.findings[0].message
