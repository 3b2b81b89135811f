"""to-fsdp on short scripts, through the library as a user calls it: where the shard goes, which
blocks it finds (also in the script's own modules), what checkpoints become, and what it refuses.
The golden cases hold whole scripts; these pin one behaviour each."""

from __future__ import annotations

import textwrap
from pathlib import Path

from migrate import FsdpOptions, migrate_source
from migrate.project_files import read_from_disk

BLOCKS_ELSEWHERE = """\
import torch
import torch.nn as nn
import layers as L


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = L.Trunk(16, depth=3)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.trunk(x))


def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = model(torch.randn(4, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""

LAYERS = """\
import torch.nn as nn


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return x + self.linear(x)


class Trunk(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = nn.Sequential(*[Residual(width) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)
"""


def convert(tmp_path: Path, code: str, options: FsdpOptions | None = None, files: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    return migrate_source(textwrap.dedent(code), "fsdp", options, path=str(tmp_path / "train.py"), read_module=read_from_disk)


def messages(result, code: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.message for f in result.findings if f.code == code]


def test_blocks_are_found_through_the_script_s_own_modules(tmp_path: Path) -> None:
    """Net (in the script) builds L.Trunk (in layers.py), whose Sequential repeats Residual."""
    result = convert(tmp_path, BLOCKS_ELSEWHERE, files={"layers.py": LAYERS})
    assert "from layers import Residual" in result.new
    assert ("        if isinstance(submodule, Residual):\n            fully_shard(submodule, mesh=device_mesh)\n"
            "    fully_shard(model, mesh=device_mesh)") in result.new
    assert any("sharded per `Residual` (the repeated blocks found)" in m for m in messages(result, "MIG301"))


def test_without_the_module_only_the_root_is_sharded_and_the_note_says_why(tmp_path: Path) -> None:
    result = convert(tmp_path, BLOCKS_ELSEWHERE)  # no layers.py beside it
    assert "isinstance(submodule" not in result.new and "fully_shard(model" in result.new
    assert messages(result, "MIG301") == [
        "`model` is sharded as one unit: `Net` holds no list of repeated blocks this run can read (`L.Trunk`, which "
        "it builds, is not defined in this file or in a module of its folder), so every forward gathers all its "
        "weights at once; name a block class with --shard CLASS to shard it finer"]


def test_shard_names_blocks_and_unseen_classes_are_matched_by_name(tmp_path: Path) -> None:
    result = convert(tmp_path, BLOCKS_ELSEWHERE, FsdpOptions(shard=("Residual", "DecoderLayer")), files={"layers.py": LAYERS})
    assert 'isinstance(submodule, Residual) or type(submodule).__name__ in ("DecoderLayer",)' in result.new
    assert any("`DecoderLayer` matched by class name" in m for m in messages(result, "MIG301"))


def test_an_optimizer_built_by_a_helper_first_gets_the_shard_above_it(tmp_path: Path) -> None:
    code = BLOCKS_ELSEWHERE.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n", "    optimizer = make_optimizer(model)\n"
    ).replace("def main():", "def make_optimizer(module):\n    return torch.optim.SGD(module.parameters(), lr=0.1)\n\n\ndef main():")
    result = convert(tmp_path, code, files={"layers.py": LAYERS})
    shard = result.new.index("    fully_shard(model, mesh=device_mesh)")
    assert shard < result.new.index("    optimizer = make_optimizer(model)")
    assert "# FSDP2: sharded before the optimizer is built" in result.new


def test_a_model_the_script_never_moves_is_sharded_where_it_is(tmp_path: Path) -> None:
    result = convert(tmp_path, BLOCKS_ELSEWHERE, files={"layers.py": LAYERS})
    assert "device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))" in result.new
    placed = convert(tmp_path, BLOCKS_ELSEWHERE.replace("model = Net()", "model = Net().to('cuda')"))
    assert "init_device_mesh" not in placed.new  # placed on the GPU: FSDP2's default mesh is that one


def test_a_model_moved_to_a_device_that_may_be_the_cpu_is_sharded_on_its_own_device(tmp_path: Path) -> None:
    """`device = "cpu"` under a test-mode flag, `model.to(device)`: on a GPU host the default mesh
    would put the shards on the GPU while the batches stay on the CPU."""
    code = BLOCKS_ELSEWHERE.replace("    model = Net()\n", "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                                    "    if len(sys.argv) > 1:\n        device = 'cpu'\n    model = Net()\n    model.to(device)\n")
    result = convert(tmp_path, "import sys\n" + code, files={"layers.py": LAYERS})
    assert "model.to(device)" in result.new
    assert "device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))" in result.new
    assert "    fully_shard(model, mesh=device_mesh)" in result.new


def test_data_parallel_checkpoints_keep_their_module_keys(tmp_path: Path) -> None:
    code = BLOCKS_ELSEWHERE.replace("    model = Net()\n", "    model = nn.DataParallel(Net())\n    model.load_state_dict(torch.load('old.pt'))\n")
    code = code.replace("        optimizer.step()\n", "        optimizer.step()\n    torch.save(model.state_dict(), 'new.pt')\n")
    result = convert(tmp_path, code, files={"layers.py": LAYERS})
    assert "DataParallel(" not in result.new
    assert 'model_state = {f"module.{key}": value for key, value in model_state.items()}' in result.new
    # the script loaded into its DataParallel (keys `module.x`); it now loads into the module itself
    assert ("model.load_state_dict({key.removeprefix(\"module.\"): value for key, value in "
            "torch.load('old.pt', map_location=device).items()})") in result.new


def test_a_model_and_its_optimizer_on_one_line_are_refused(tmp_path: Path) -> None:
    code = BLOCKS_ELSEWHERE.replace(
        "    model = Net()\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "    model = Net(); optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    result = convert(tmp_path, code)
    assert result.new == result.old
    assert any("on one line" in m and "left unchanged" in m for m in messages(result, "MIG308"))


def test_a_ddp_script_keeps_its_own_setup_and_its_accumulation_flag_moves(tmp_path: Path) -> None:
    code = """\
    import os
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    master = dist.get_rank() == 0
    net = nn.Linear(4, 1)
    model = DDP(net)
    raw_model = model.module if isinstance(model, DDP) else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(8):
        model.require_backward_grad_sync = step % 2 == 1
        model(torch.randn(2, 4)).sum().backward()
        if step % 2 == 1:
            optimizer.step()
            optimizer.zero_grad()
    if master:
        torch.save(raw_model.state_dict(), "model.pt")
    dist.destroy_process_group()
    """
    result = convert(tmp_path, code)
    assert result.new.count("init_process_group") == 1 and "DistributedSampler" not in result.new
    assert "model.set_requires_gradient_sync(step % 2 == 1)" in result.new
    assert "raw_model = model\n" in result.new
    gather = result.new.index("raw_model_state = get_model_state_dict(raw_model")
    assert gather < result.new.index("if master:") < result.new.index("torch.save(raw_model_state")
    assert any("DistributedDataParallel on" in m for m in messages(result, "MIG305"))


def test_loads_after_the_shard_keep_the_device_their_files_are_read_to(tmp_path: Path) -> None:
    code = """\
    import torch
    import torch.nn as nn

    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
    model.load_state_dict(torch.load("model.pt"), strict=False)
    optimizer.load_state_dict(torch.load("optimizer.pt"))
    """
    result = convert(tmp_path, code)
    assert ('set_model_state_dict(model, torch.load("model.pt", map_location=device), '
            "options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False))") in result.new
    assert ('set_optimizer_state_dict(model, optimizer, named_optimizer_state(model, optimizer, torch.load("optimizer.pt", '
            "map_location=device)), options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))") in result.new


def test_a_model_moved_under_a_flag_after_a_print_is_sharded_below_the_move_on_its_own_device(tmp_path: Path) -> None:
    """A WGAN's `print(netD)`, then `if opt.cuda: netD.cuda()`, then the optimizer: the shard goes
    below the move (as DDP's wrap does), on a mesh of the device the model is on then; above the
    move, FSDP2's default mesh put the model on the GPU of a host run without the flag."""
    code = BLOCKS_ELSEWHERE.replace("    model = Net()\n", "    model = Net()\n    print(model)\n"
                                    "    if len(sys.argv) > 1:\n        model.cuda()\n")
    result = convert(tmp_path, "import sys\n" + code, files={"layers.py": LAYERS})
    lines = [line.strip() for line in result.new.splitlines()]
    moved = lines.index("model.to(device)")  # `.cuda()`: this rank's GPU
    assert lines[moved + 1].startswith("# sharded on the device the script keeps the model on")
    assert "device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))" in lines
    assert lines.index("fully_shard(model, mesh=device_mesh)") > moved
