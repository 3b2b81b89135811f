"""DeepSpeed and where the script keeps its model (issue 24): `deepspeed.initialize` moves the
module to DeepSpeed's accelerator (the GPU on a GPU host), never the batches. A model the script
never moves keeps DeepSpeed on the CPU with it (DS_ACCELERATOR=cpu set before DeepSpeed is
imported, gloo, epoch figures on the CPU; MIG130, a note); one moved only under an `if` is converted
as for a GPU with a warning naming the `if` (MIG131). The analysis is migrate.analysis.placement,
shared with FSDP's mesh choice. Conversion only.
"""

from __future__ import annotations

import libcst as cst
import pytest

from migrate import DeepSpeedOptions
from migrate.analysis import analyze
from migrate.analysis.placement import device_conditions, placed_by_script
from migrate.api import migrate_source
from migrate.records import FileResult, Severity

HEAD = """import argparse
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def build(args):
    return nn.Linear(4, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args()
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
"""
TAIL = """    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        total = 0.0
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(epoch, total / len(loader))


if __name__ == "__main__":
    main()
"""
ON_CPU = 'os.environ.setdefault("DS_ACCELERATOR", "cpu")'
GLOO = 'deepspeed.init_distributed(dist_backend="gloo")'
NCCL_ON_GPU = 'deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")'


def script(placement: str, head: str = HEAD) -> str:
    body = "".join(f"    {line}\n" for line in placement.splitlines())
    return head + body + TAIL


def convert(source: str) -> FileResult:
    return migrate_source(source, "deepspeed", DeepSpeedOptions(zero=2), path="train.py")


def line_of(text: str, part: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if part in line)


def codes(result: FileResult) -> set[str]:
    return {f.code for f in result.findings}


def test_a_model_never_moved_keeps_deepspeed_on_the_cpu() -> None:
    source = script("model = build(args)")
    result = convert(source)
    assert not result.skipped and "deepspeed.initialize(model=model" in result.new
    new = result.new
    # the accelerator is chosen at `import deepspeed`: the variable is set right before it
    assert line_of(new, ON_CPU) + 1 == line_of(new, "import deepspeed")
    assert line_of(new, "import os") < line_of(new, ON_CPU)
    assert GLOO in new and "nccl" not in new
    assert "figures = torch.tensor([total], dtype=torch.float64)\n" in new  # gloo takes CPU tensors
    [note] = [f for f in result.findings if f.code == "MIG130"]
    assert note.severity is Severity.NOTE
    assert note.line == line_of(source, "model = build(args)")
    for words in ("keeps the model and its batches on the CPU", "`DS_ACCELERATOR=cpu` before `import deepspeed`",
                  "`model.to(device)`", "convert again"):
        assert words in note.message
    compile(new, "train.py", "exec")


def test_the_variable_goes_before_the_scripts_own_import_of_deepspeed() -> None:
    head = HEAD.replace("import argparse\n", "import argparse\nimport os\nfrom deepspeed.ops.adam import FusedAdam\n")
    result = convert(script("model = build(args)", head))
    assert not result.skipped
    new = result.new
    assert line_of(new, ON_CPU) + 1 == line_of(new, "from deepspeed.ops.adam import FusedAdam")
    assert new.count(ON_CPU) == 1 and new.count("import os\n") == 1
    compile(new, "train.py", "exec")


def test_a_late_import_of_deepspeed_in_the_script_comes_after_the_variable_too() -> None:
    """The script's own DeepSpeed import below a def runs after the conversion's `import deepspeed`
    at the top: the variable goes before the conversion's."""
    source = script("model = build(args)").replace("def main():", "from deepspeed.ops.adam import FusedAdam\n\n\ndef main():")
    result = convert(source)
    assert not result.skipped
    new = result.new
    assert line_of(new, ON_CPU) + 1 == line_of(new, "import deepspeed") < line_of(new, "from deepspeed.ops.adam")
    assert new.count(ON_CPU) == 1
    compile(new, "train.py", "exec")


def test_a_model_moved_under_a_flag_is_converted_for_the_gpu_with_the_condition_named() -> None:
    source = script("model = build(args)\nif args.cuda:\n    model = model.cuda()")
    result = convert(source)
    assert not result.skipped and "deepspeed.initialize(model=model" in result.new
    assert NCCL_ON_GPU in result.new and "DS_ACCELERATOR" not in result.new
    assert 'torch.tensor([total], dtype=torch.float64, device="cuda" if torch.cuda.is_available() else "cpu")' in result.new
    [warning] = [f for f in result.findings if f.code == "MIG131"]
    assert warning.severity is Severity.WARNING
    assert warning.line == line_of(source, "if args.cuda:")
    assert f"`if args.cuda:` (line {warning.line})" in warning.message
    assert "with the condition false on a GPU host" in warning.message
    assert "MIG130" not in codes(result)


@pytest.mark.parametrize("placement", [
    "model = build(args).to(torch.device('cuda' if torch.cuda.is_available() else 'cpu'))",
    "model = build(args)\nmodel.to('cpu' if args.cuda else 'cpu')",
    "model = build(args)\nif torch.cuda.is_available():\n    model.cuda()",  # true on every GPU host
    "model = build(args)\nif args.cuda:\n    model.cuda()\nelse:\n    pass\nmodel.to(torch.device('cpu'))",
])
def test_a_model_the_script_always_places_converts_as_before(placement: str) -> None:
    result = convert(script(placement))
    assert not result.skipped
    assert NCCL_ON_GPU in result.new and "DS_ACCELERATOR" not in result.new
    assert not {"MIG130", "MIG131"} & codes(result)


def test_a_move_where_the_model_is_built_counts() -> None:
    """The function that builds and returns the model moves it: the caller's model is placed."""
    source = script("model = build(args)").replace("return nn.Linear(4, 1)", "net = nn.Linear(4, 1)\n    net.cuda()\n    return net")
    result = convert(source)
    assert not result.skipped and "DS_ACCELERATOR" not in result.new and not {"MIG130", "MIG131"} & codes(result)


GAN = """import torch
import torch.nn as nn


def main():
    generator = nn.Linear(2, 2)
    critic = nn.Linear(2, 1).cuda()
    opt_g = torch.optim.Adam(generator.parameters())
    opt_c = torch.optim.Adam(critic.parameters())
    for step in range(4):
        noise = torch.randn(8, 2)
        loss_c = critic(generator(noise).detach().cuda()).mean()
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
        loss_g = -critic(generator(noise).cuda()).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()


if __name__ == "__main__":
    main()
"""


def test_one_model_moved_and_another_not_keeps_the_gpu_and_names_the_one_left() -> None:
    result = convert(GAN)
    assert not result.skipped and "DS_ACCELERATOR" not in result.new
    [warning] = [f for f in result.findings if f.code == "MIG131"]
    assert warning.line == line_of(GAN, "generator = nn.Linear(2, 2)")
    assert "`generator` is never moved to a device while `critic` is" in warning.message


def test_a_refused_file_gets_no_placement_finding() -> None:
    """MIG130 says what the conversion did: a file left unchanged for another reason has none."""
    source = script("model = build(args)").replace("    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
                                                   "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                                                   "    optimizer2 = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                                                   ).replace("optimizer.step()", "optimizer.step()\n            optimizer2.step()")
    result = convert(source)
    assert result.skipped and result.new == source
    assert not {"MIG130", "MIG131"} & codes(result)


def sites_of(source: str):  # type: ignore[no-untyped-def]
    sites = analyze(cst.parse_module(source))
    [site] = sites.models
    return sites.index, site


def test_the_shared_analysis_tells_fsdp_and_deepspeed_apart() -> None:
    """FSDP asks whether the script places the model before or after the wrap, unconditionally;
    DeepSpeed whether any move depends on an `if`, wherever it is."""
    never = sites_of(script("model = build(args)"))
    assert device_conditions(*never) is None and not placed_by_script(*never)
    flagged = sites_of(script("model = build(args)\nif args.cuda:\n    model.cuda()"))
    conditions = device_conditions(*flagged)
    assert conditions is not None and [cst.Module([]).code_for_node(c.test) for c in conditions] == ["args.cuda"]
    assert not placed_by_script(*flagged)
    always = sites_of(script("model = build(args)\nmodel.cuda()"))
    assert device_conditions(*always) == () and placed_by_script(*always)
