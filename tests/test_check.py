"""`migrate check`: each rule on a minimal script that has the pitfall and on one that does not,
the command line (codes, --select/--ignore, exit status, JSON, syntax errors), and the tool's own
converted samples, which must check clean."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from migrate.api import migrate_source
from migrate.check import check_source
from migrate.check.rules import RULES
from migrate.check_command import check
from migrate import DeepSpeedOptions

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "samples").glob("*/train.py"))

DDP_HEAD = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
dist.init_process_group("gloo")
rank = dist.get_rank()
"""
HVD_HEAD = """
import torch
import horovod.torch as hvd
hvd.init()
model = torch.nn.Linear(2, 2)
"""


def codes(body: str, head: str = DDP_HEAD, path: str = "train.py") -> list[str]:
    tail = "\ndist.destroy_process_group()\n" if "init_process_group" in head else "\n"
    return [v.code for v in check_source(head + textwrap.dedent(body) + tail, path)]


def app() -> typer.Typer:
    made = typer.Typer()
    made.command("check")(check)
    made.command("other")(lambda: None)  # two commands, so `check` is named as in the CLI
    return made


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app(), ["check", *args])


# -- DC101 ---------------------------------------------------------------------------------------
def test_data_parallel_is_found_in_any_script():
    assert codes("import torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2))\n", head="") == ["DC101"]


def test_isinstance_of_data_parallel_is_not_a_use():
    assert codes("import torch.nn as nn\nm = nn.Linear(2, 2)\nok = isinstance(m, nn.DataParallel)\n", head="") == []


# -- DC201 / DC202 / DC203 ------------------------------------------------------------------------
TRAIN = """
ds = list(range(8))
model = DDP(torch.nn.Linear(1, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{loader}
for epoch in range(3):
    {set_epoch}
    for x in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
"""


def test_training_loader_without_sampler():
    assert codes(TRAIN.format(loader="loader = DataLoader(ds, shuffle=True)", set_epoch="pass")) == ["DC201"]


def test_training_loader_with_sampler_and_set_epoch_is_clean():
    body = TRAIN.format(loader="sampler = DistributedSampler(ds)\nloader = DataLoader(ds, sampler=sampler)",
                        set_epoch="sampler.set_epoch(epoch)")
    assert codes(body) == []


def test_loader_without_sampler_in_a_single_process_script_is_not_found():
    body = TRAIN.format(loader="loader = DataLoader(ds, shuffle=True)", set_epoch="pass").replace("DDP(", "(")
    assert codes(body, head="import torch\nfrom torch.utils.data import DataLoader\n") == []


def test_shuffle_beside_a_sampler_is_an_error():
    found = codes("ds = [1]\nloader = DataLoader(ds, sampler=DistributedSampler(ds), shuffle=True)\n")
    assert found == ["DC202"]
    assert codes("ds = [1]\nloader = DataLoader(ds, sampler=DistributedSampler(ds), shuffle=False)\n") == []


def test_set_epoch_missing_over_several_epochs():
    body = TRAIN.format(loader="sampler = DistributedSampler(ds)\nloader = DataLoader(ds, sampler=sampler)", set_epoch="pass")
    assert codes(body) == ["DC203"]


def test_set_epoch_is_not_needed_without_shuffling():
    body = TRAIN.format(loader="sampler = DistributedSampler(ds, shuffle=False)\nloader = DataLoader(ds, sampler=sampler)",
                        set_epoch="pass")
    assert codes(body) == []


# -- DC301-DC304 ------------------------------------------------------------------------------------
def test_horovod_script_missing_everything():
    body = "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nshard = torch.randn(8, 2)[hvd.rank()::hvd.size()]\n"
    assert sorted(codes(body, head=HVD_HEAD)) == ["DC301", "DC302", "DC304"]


def test_horovod_script_done_right_is_clean():
    body = """
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt.load_state_dict(torch.load("ckpt.pt")["opt"])
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    """
    assert codes(body, head=HVD_HEAD) == []


def test_horovod_lr_scaled_on_another_line_counts():
    body = """
    lr = 0.1 * hvd.size()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    """
    assert codes(body, head=HVD_HEAD) == []


def test_horovod_optimizer_state_loaded_and_not_broadcast():
    body = """
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size()))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt.load_state_dict(torch.load("ckpt.pt")["opt"])
    """
    assert codes(body, head=HVD_HEAD) == ["DC303"]


# -- DC401 / DC402 ------------------------------------------------------------------------------------
def test_print_and_save_on_every_rank():
    found = codes("print('hi')\ntorch.save({}, 'x.pt')\nwith open('log.txt', 'w') as f:\n    pass\n")
    assert found == ["DC401", "DC402", "DC402"]


@pytest.mark.parametrize("guard", [
    "if rank == 0:", "if dist.get_rank() == 0:", "if local_rank in (-1, 0):", "if not dist.is_initialized() or rank == 0:",
    "if is_master:", "if args.rank % 8 == 0:", "if dist.get_rank() != 0:\n    pass\nelse:",
])
def test_print_and_save_under_a_rank_zero_guard_are_clean(guard: str):
    body = f"is_master = rank == 0\nclass A: rank = 0\nargs = A()\n{guard}\n    print('hi')\n    torch.save({{}}, 'x.pt')\n"
    assert codes(body) == []


def test_after_an_early_exit_and_in_a_function_only_rank_zero_calls():
    body = """
    def report():
        print("done")
    def main():
        if rank != 0:
            return
        torch.save({}, "x.pt")
    if rank == 0: report()
    main()
    """
    assert codes(body) == []


def test_print_of_a_per_rank_figure_and_a_per_rank_file_are_meant():
    assert codes("print(f'rank {rank}: ok')\ntorch.save({}, f'shard_{rank}.pt')\n") == []


def test_output_of_a_script_that_sets_up_nothing_is_not_found():
    assert codes("import torch\nprint('hi')\ntorch.save({}, 'x.pt')\n", head="") == []


# -- DC501 ------------------------------------------------------------------------------------------
def test_collectives_under_a_rank_guard_hang():
    body = """
    model = DDP(torch.nn.Linear(1, 1))
    if rank == 0:
        dist.barrier()
        out = model(torch.ones(1))
        print(out)
    """
    assert codes(body) == ["DC501", "DC501"]


def test_a_function_running_a_collective_called_under_a_guard():
    body = """
    def sync():
        dist.all_reduce(torch.ones(1))
    sync()
    if rank == 0:
        sync()
    """
    assert codes(body) == ["DC501"]


def test_collective_on_every_rank_then_print_on_rank_zero_is_clean():
    body = """
    model = DDP(torch.nn.Linear(1, 1))
    t = torch.ones(1)
    dist.all_reduce(t)
    out = model(t)
    if rank == 0:
        print(out, model.module(t))
    """
    assert codes(body) == []


# -- DC601 / DC602 / DC701 / DC801 -----------------------------------------------------------------
def test_optimizer_before_fully_shard():
    head = DDP_HEAD + "from torch.distributed.fsdp import fully_shard\nmodel = torch.nn.Linear(1, 1)\n"
    assert codes("opt = torch.optim.AdamW(model.parameters())\nfully_shard(model)\n", head=head) == ["DC601"]
    assert codes("fully_shard(model)\nopt = torch.optim.AdamW(model.parameters())\n", head=head) == []


def test_module_prefix_saved():
    body = "net = torch.nn.Linear(1, 1)\nmodel = DDP(net)\nif rank == 0:\n    torch.save(model.state_dict(), 'm.pt')\n"
    assert codes(body) == ["DC602"]
    assert codes(body.replace("model.state_dict()", "model.module.state_dict()")) == []


def test_deepspeed_batch_arithmetic_in_a_dict_literal():
    head = "import deepspeed\n"
    bad = 'cfg = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 6, "gradient_accumulation_steps": 1}\n'
    assert codes(bad, head=head) == ["DC701"]
    assert codes(bad.replace("6", "4"), head=head) == []
    assert codes('cfg = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": "auto"}\n', head=head) == []


def test_deepspeed_batch_arithmetic_in_a_json_file_beside_the_script(tmp_path: Path):
    (tmp_path / "ds.json").write_text('{\n  "train_batch_size": 10,\n  "gradient_accumulation_steps": 4\n}\n')
    script = tmp_path / "train.py"
    script.write_text("import deepspeed\nconfig = 'ds.json'\n")
    result = run(str(script))
    assert result.exit_code == 1
    assert f"{tmp_path / 'ds.json'}:2:3: DC701 train_batch_size 10" in result.stdout


def test_process_group_never_destroyed():
    assert codes("x = 1\n") == []  # codes() ends the script with destroy_process_group()
    assert [v.code for v in check_source(DDP_HEAD, "t.py")] == ["DC801"]


# -- the command line -------------------------------------------------------------------------------
BAD = "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\nprint(1)\n"


def test_text_output_codes_and_exit_status(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(BAD)
    result = run(str(script))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{script}:3:1: DC801 " + check_source(BAD, str(script))[0].message,
        f"{script}:4:1: DC401 " + check_source(BAD, str(script))[1].message,
    ]
    assert result.stderr.strip() == "Found 2 findings in 1 of 1 file."


def test_select_ignore_prefixes_json_and_noqa(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(BAD)
    assert run("--select", "DC8", str(script)).stdout.count("DC") == 1
    clean = run("--ignore", "DC4,DC801", str(script))
    assert (clean.exit_code, clean.stdout) == (0, "")
    assert "All checks passed (1 file)" in clean.stderr
    entries = json.loads(run("--report", "json", "--select", "DC401", str(script)).stdout)
    assert entries == [{"path": str(script), "line": 4, "col": 1, "code": "DC401", "severity": "warning",
                        "message": entries[0]["message"]}]
    script.write_text(BAD.replace("print(1)", "print(1)  # noqa: DC4").replace("'gloo')", "'gloo')  # noqa"))
    assert run(str(script)).exit_code == 0


def test_bad_input_exits_2_naming_the_users_file(tmp_path: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    result = run(str(broken))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{broken}:1:7: syntax error:")
    assert run("--select", "DC9", str(broken)).exit_code == 2
    assert run("--report", "sarif", str(broken)).exit_code == 2


def test_folders_are_searched_and_list_rules_names_every_code(tmp_path: Path):
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "b.py").write_text("x = 1\n")
    result = run(str(tmp_path))
    assert result.exit_code == 1 and "in 1 of 2 files" in result.stderr
    listed = run("--list-rules").stdout
    assert [line.split()[0] for line in listed.splitlines()] == [rule.code for rule in RULES]


# -- the tool's own output checks clean ------------------------------------------------------------
@pytest.mark.parametrize("target", ["ddp", "fsdp", "deepspeed", "horovod"])
@pytest.mark.parametrize("sample", SAMPLES, ids=[p.parent.name for p in SAMPLES])
def test_converted_samples_check_clean(sample: Path, target: str):
    # to-deepspeed leaves cnn_classifier unchanged at ZeRO 2 (its optimizer checkpoint would be one
    # rank's shard); at ZeRO 0 it converts
    refused_at_zero_2 = (sample.parent.name, target) == ("cnn_classifier", "deepspeed")
    options = DeepSpeedOptions(zero=0) if refused_at_zero_2 else None
    converted = migrate_source(sample.read_text(), target, options, path=str(sample))
    assert converted.changed
    assert [v.render() for v in check_source(converted.new, str(sample))] == []


# -- rules narrowed on the shapes of the tool's own outputs (tests/test_check_goldens.py) ----------
def test_horovod_lr_is_not_flagged_when_the_data_is_not_sharded():
    body = """
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(10):
        x = torch.randn(4, 2)
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    """
    assert codes(body, head=HVD_HEAD) == []
    sharded = body.replace("x = torch.randn(4, 2)", "x = data[hvd.rank()::hvd.size()]")
    assert codes("data = torch.randn(64, 2)\n" + textwrap.dedent(sharded), head=HVD_HEAD) == ["DC301"]


def test_horovod_optimizer_from_a_factory_that_is_wrapped_after_is_not_unwrapped():
    body = """
    def make(m):
        return torch.optim.SGD(m.parameters(), lr=0.1 * hvd.size())
    opt = make(model)
    opt = hvd.DistributedOptimizer(opt)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    """
    assert codes(body, head=HVD_HEAD) == []
    assert codes(body.replace("opt = hvd.DistributedOptimizer(opt)", "pass"), head=HVD_HEAD) == ["DC304"]


def test_averaged_model_is_not_an_optimizer():
    body = """
    from torch.optim.swa_utils import AveragedModel
    averaged = AveragedModel(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size()))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    """
    assert codes(body, head=HVD_HEAD) == []


def test_the_projects_own_save_checkpoint_under_a_guard_is_not_the_engines():
    head = "import deepspeed\nimport torch.distributed as dist\nfrom utils import save_checkpoint\nimport utils\n" \
           "deepspeed.init_distributed()\nengine, _, _, _ = deepspeed.initialize(model=m)\n"
    body = "if dist.get_rank() == 0:\n    save_checkpoint({})\n    utils.save_checkpoint({})\ndist.destroy_process_group()\n"
    assert codes(body, head=head) == []
    assert codes(body.replace("    utils.save", "    engine.save"), head=head) == ["DC501"]


def test_module_prefix_kept_on_purpose_is_not_flagged():
    body = "net = torch.nn.Linear(1, 1)\nmodel = DDP(net)\nif rank == 0:\n    torch.save(model.state_dict(), 'm.pt'){}\n"
    assert codes(body.format("")) == ["DC602"]
    assert codes(body.format("  # keys keep the module. prefix of the DataParallel checkpoints")) == []
    loads = "sd = {k.removeprefix('module.'): v for k, v in torch.load('m.pt').items()}\n"
    assert codes(loads + body.format("")) == []


STREAM = """
class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        {body}
model = DDP(torch.nn.Linear(1, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Stream(), batch_size=2)
for x in loader:
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def test_an_iterable_dataset_is_told_how_to_split_it_and_one_split_by_rank_is_clean():
    found = check_source(DDP_HEAD + STREAM.format(body="yield from range(8)") + "dist.destroy_process_group()\n")
    assert [v.code for v in found] == ["DC201"]
    assert "iterable dataset" in found[0].message and "DistributedSampler(dataset)" not in found[0].message
    split = "yield from range(dist.get_rank(), 8, dist.get_world_size())"
    assert codes(textwrap.indent(STREAM.format(body=split), "")) == []


# -- DC802 ------------------------------------------------------------------------------------------
NCCL_HEAD = DDP_HEAD.replace('init_process_group("gloo")', 'init_process_group(backend="nccl")')


def test_nccl_collective_on_a_cpu_tensor_and_ddp_of_a_model_left_on_the_cpu():
    body = """
    t = torch.zeros(3)
    dist.all_reduce(t)
    dist.broadcast(torch.tensor([1.0]), src=0)
    model = DDP(torch.nn.Linear(2, 2))
    """
    assert codes(body, head=NCCL_HEAD) == ["DC802", "DC802", "DC802"]


def test_nccl_with_cuda_tensors_a_moved_model_or_a_cpu_backend_is_clean():
    body = """
    t = torch.zeros(3, device="cuda")
    dist.all_reduce(t)
    u = torch.ones(2)
    u = u.cuda()
    dist.all_reduce(u)
    dist.all_reduce(torch.ones(1, device=device))
    net = torch.nn.Linear(2, 2).cuda()
    model = DDP(net)
    """
    assert codes("device = 'cuda'\n" + textwrap.dedent(body), head=NCCL_HEAD) == []
    cpu_only = "t = torch.zeros(3)\ndist.all_reduce(t)\nmodel = DDP(torch.nn.Linear(2, 2))\n"
    assert codes(cpu_only) == []  # gloo
    mixed = DDP_HEAD.replace('"gloo"', '"cpu:gloo,cuda:nccl"')
    assert codes(cpu_only, head=mixed) == []
