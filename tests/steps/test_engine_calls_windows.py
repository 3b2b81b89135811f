"""engine_calls: mixed precision through DeepSpeed's torch_autocast section, and accumulation
windows that follow the script's own `if` test (engine.set_gradient_accumulation_boundary).

Precision: an autocast block of the config's precision stays (the loss under it keeps its
precision), one of another precision goes; the script's `enabled=` overwrites
torch_autocast.enabled. Accumulation: the script's test is handed to the engine before each
backward, unless it would read something else there (MIG126); a zero_grad that drops an
unfinished window, which DeepSpeed cannot do, is reported (MIG126).
"""

from __future__ import annotations

import json

from migrate import DeepSpeedOptions, migrate_source
from migrate.steps.deepspeed_engine import deepspeed_engine
from migrate.steps.engine_calls import engine_calls
from tests.steps.helpers import run_steps

BOTH = [deepspeed_engine, engine_calls]

BF16 = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main(amp=True):
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


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
    optimizer.zero_grad()
    for epoch in range(3):
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y) / 4
            loss.backward()
            if (i + 1) % 4 == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""

BOUNDARY = "model.set_gradient_accumulation_boundary((i + 1) % 4 == 0 or i + 1 == len(loader))"


def config_of(source: str, **options: object) -> dict[str, object]:
    result = migrate_source(source, "deepspeed", DeepSpeedOptions(**options), path="train.py")  # type: ignore[arg-type]
    return json.loads(next(a.text for a in result.artifacts if a.path.endswith("ds_config.json")))


def test_a_bfloat16_autocast_is_torch_autocast_in_the_config_and_its_block_stays() -> None:
    result = run_steps(BOTH, BF16, target="deepspeed")
    assert '        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):\n' in result.text
    assert 'ds_config["torch_autocast"]["enabled"] = amp\n' in result.text
    config = config_of(BF16)
    assert config["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    assert config["fp16"] == {"enabled": False} and config["bf16"] == {"enabled": False}


def test_a_block_of_another_precision_than_the_config_goes() -> None:
    """--fp32: the engine computes in fp32 (no torch_autocast); --fp16 on a bfloat16 block: the
    config's float16 alone decides, not a bfloat16 loss around it."""
    for precision, autocast in (("fp32", None), ("fp16", {"enabled": True, "dtype": "float16"})):
        result = run_steps(BOTH, BF16, target="deepspeed", precision=precision)
        assert "autocast(" not in result.text, precision
        assert "            loss = nn.functional.mse_loss(model(x), y)\n" not in result.text
        assert config_of(BF16, precision=precision).get("torch_autocast") == autocast


def test_a_script_without_autocast_gets_one_from_the_config_alone() -> None:
    source = BF16.replace('        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):\n    ', "")
    result = run_steps(BOTH, source, target="deepspeed", precision="bf16")
    assert "torch_autocast" not in result.text  # no switch of the script's to follow
    assert config_of(source, precision="bf16")["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}


def test_float16_under_zero_is_reported() -> None:
    """DeepSpeed 0.19.8's ZeRO optimizers never lower the GradScaler's scale after an overflow
    (tests/equivalence/test_deepspeed_precision.py shows the stall); without ZeRO all is well."""
    fp16 = run_steps(BOTH, BF16, target="deepspeed", precision="fp16")
    assert [code for code, _line in fp16.codes] == ["MIG126"]
    assert "does not lower the scale" in fp16.findings[0].message
    assert run_steps(BOTH, BF16, target="deepspeed", precision="fp16", zero=0).findings == ()
    assert run_steps(BOTH, BF16, target="deepspeed").findings == ()  # bfloat16 has no scaler


def test_the_engine_steps_on_the_script_s_own_boundaries() -> None:
    """Set before the backward, with the script's test (the last micro-step of each epoch too);
    the engine's own count would run on across epochs instead."""
    result = run_steps(BOTH, ACCUMULATING, target="deepspeed")
    loop = (
        "        for i, (x, y) in enumerate(loader):\n"
        "            loss = nn.functional.mse_loss(model(x), y) / 4\n"
        "            # the engine steps the optimizer when the script's own test holds (its own count runs on across epochs)\n"
        f"            {BOUNDARY}\n"
        "            model.backward(loss, scale_wrt_gas=False)\n"
        "            model.step()\n"
        "\n\n"
    )
    assert loop in result.text
    assert result.findings == ()  # the zero_grad before the epochs clears nothing


def test_a_test_that_reads_something_else_before_the_backward_keeps_the_engine_s_count() -> None:
    counted = ACCUMULATING.replace(
        "            loss.backward()\n            if (i + 1) % 4 == 0 or i + 1 == len(loader):\n",
        "            loss.backward()\n            i += 1\n            if i % 4 == 0:\n",
    )
    result = run_steps(BOTH, counted, target="deepspeed")
    assert "set_gradient_accumulation_boundary" not in result.text
    assert result.codes == [("MIG126", 16)]
    assert "`i` changes between the backward and the test" in result.findings[0].message


def test_a_test_that_calls_something_keeps_the_engine_s_count() -> None:
    """Read once more before the backward, `should_step()` could change what it answers at the `if`."""
    calling = ACCUMULATING.replace("(i + 1) % 4 == 0 or i + 1 == len(loader)", "should_step() % 4 == 0")
    calling = calling.replace("def main():\n", "def should_step():\n    return 4\n\n\ndef main():\n")
    result = run_steps(BOTH, calling, target="deepspeed")
    assert "set_gradient_accumulation_boundary" not in result.text
    assert [code for code, _line in result.codes] == ["MIG126"]
    assert "it calls `should_step`" in result.findings[0].message


def test_a_zero_grad_that_drops_an_unfinished_window_is_reported() -> None:
    """At the start of each epoch the original drops what the last epoch left unstepped; the
    engine keeps it for the next update."""
    dropping = ACCUMULATING.replace(
        "    optimizer.zero_grad()\n    for epoch in range(3):\n",
        "    for epoch in range(3):\n        optimizer.zero_grad()\n",
    )
    result = run_steps(BOTH, dropping, target="deepspeed")
    assert BOUNDARY in result.text
    assert result.codes == [("MIG126", 11)]
    assert "DeepSpeed has no call that drops them" in result.findings[0].message
