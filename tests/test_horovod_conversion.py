"""to-horovod on short scripts, as a user calls it (the library and the command line): the lr
recipe and its opt-outs, the launcher for one node and several, Horovod 0.28.1's `zero_grad()`,
where the optimizer's state is broadcast, and what it refuses. The golden cases hold whole
scripts; these pin one behaviour each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from migrate import HorovodOptions, migrate_source
from migrate.targets import targets

SCRIPT = """\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default=None)
    args = parser.parse_args()
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    if args.resume:
        state = torch.load(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=False)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")


if __name__ == "__main__":
    main()
"""


def convert(options: HorovodOptions | None = None, source: str = SCRIPT):  # type: ignore[no-untyped-def]
    result = migrate_source(source, "horovod", options, path="train.py")
    assert not result.error, result.error
    return result


def test_the_lr_is_scaled_by_default_and_each_opt_out_keeps_it() -> None:
    assert "lr=1e-3 * hvd.size()" in convert().new
    assert "lr=1e-3 * hvd.size()" in convert(HorovodOptions(scale_lr=True)).new
    assert "lr=1e-3," in convert(HorovodOptions(scale_lr=False)).new
    kept = convert(HorovodOptions(keep_global_batch=True)).new
    assert "lr=1e-3," in kept and "batch_size=max(1, 16 // hvd.size())" in kept


def test_the_command_line_scales_unless_told_not_to(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    for flags, scaled in (([], True), (["--no-scale-lr"], False), (["--keep-global-batch"], False)):
        diff = subprocess.run([sys.executable, "-m", "migrate", "to-horovod", *flags, str(script)],
                              capture_output=True, text=True, check=True).stdout
        assert ("lr=1e-3 * hvd.size()" in diff) is scaled, flags
    both = subprocess.run([sys.executable, "-m", "migrate", "to-horovod", "--scale-lr", "--keep-global-batch", str(script)],
                          capture_output=True, text=True)
    assert both.returncode == 2 and "choose one" in both.stderr


def test_the_optimizer_is_wrapped_before_its_state_loads_and_broadcast_after() -> None:
    lines = [line.strip() for line in convert().new.splitlines()]
    wrap = lines.index("optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())")
    load = lines.index('optimizer.load_state_dict(state["optimizer"])')
    assert wrap < load
    assert lines[load + 1].startswith("hvd.broadcast_optimizer_state(optimizer, root_rank=0)")
    assert lines.count("hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights") == 1
    assert lines.index("hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights") > \
        lines.index('model.load_state_dict(state["model"])')


def test_zero_grad_takes_no_argument_in_horovod() -> None:
    new = convert().new
    assert "torch.optim.Optimizer.zero_grad(optimizer, set_to_none=False)" in new
    assert "zero_grad()" in convert(source=SCRIPT.replace("set_to_none=False", "set_to_none=True")).new


def test_the_launcher_for_one_node_and_for_several(tmp_path: Path) -> None:
    one = convert().artifacts[0]
    assert one.path == "run_train_horovod.sh" and one.executable
    assert 'horovodrun -np "$NUM_PROCESSES" -H "localhost:$NUM_PROCESSES"' in one.text
    several = convert(HorovodOptions(hosts=("node1:4", "node-2:2"))).artifacts[0].text
    assert "exec horovodrun -np 6 -H node1:4,node-2:2 " in several
    four = convert(HorovodOptions(nproc_per_node="4")).artifacts[0].text
    assert "NUM_PROCESSES=4" in four
    for text in (one.text, several, four):
        launcher = tmp_path / "run.sh"
        launcher.write_text(text)
        assert subprocess.run(["bash", "-n", str(launcher)]).returncode == 0


def test_hosts_and_a_process_count_are_refused_together() -> None:
    from migrate.options import problems

    found = problems(targets()["horovod"], HorovodOptions(hosts=("node1:4",), nproc_per_node="4"))
    assert [p.flag for p in found] == ["--hosts/--nproc-per-node"]


ACCUMULATION_AFTER_OPTIMIZER = """\
import torch
import torch.nn as nn


def main():
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    accum = 4
    for step in range(16):
        loss = model(torch.randn(8, 4)).pow(2).mean() / accum
        loss.backward()
        if (step + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


def test_accumulation_gives_backward_passes_per_step_where_its_count_is_known() -> None:
    wrap = "optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), backward_passes_per_step=accum)"
    before = ACCUMULATION_AFTER_OPTIMIZER.replace(
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    accum = 4\n",
        "    accum = 4\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    lines = [line.strip() for line in migrate_source(before, "horovod", path="train.py").new.splitlines()]
    assert lines[lines.index(wrap) - 1].startswith("optimizer = torch.optim.SGD(")
    # bound on the line after the optimizer: the wrap waits for it
    lines = [line.strip() for line in migrate_source(ACCUMULATION_AFTER_OPTIMIZER, "horovod", path="train.py").new.splitlines()]
    assert lines[lines.index(wrap) - 1] == "accum = 4"


def test_accumulation_counted_after_the_optimizer_is_used_is_refused() -> None:
    source = ACCUMULATION_AFTER_OPTIMIZER.replace(
        "    accum = 4\n", "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)\n    accum = 4\n")
    result = migrate_source(source, "horovod", path="train.py")
    assert result.new == source
    [finding] = [f for f in result.findings if f.code == "MIG403"]
    assert "backward_passes_per_step=accum where the optimizer is built (line 7), where `accum` is not known" in finding.message


PRINTED_SUMS = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        total, batches = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        print(f"epoch {epoch} loss {DIVIDED}")


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("divided, op", [
    ("total / batches", "Sum"),                  # both sums: totals over every rank
    ("total / len(loader)", "Average"),          # this rank's batches: the mean of the ranks' sums
    ("total * 16 / len(loader.dataset)", "Sum"),  # the whole dataset: every rank's part added
    ("total / 4", None),                         # a divisor it cannot place: left alone
])
def test_printed_running_sums_are_reduced_so_rank_0_prints_every_ranks_batches(divided: str, op: str | None) -> None:
    new = convert(source=PRINTED_SUMS.replace("{DIVIDED}", "{" + divided + "}")).new
    lines = [line.strip() for line in new.splitlines()]
    if op is None:
        assert "hvd.allreduce" not in new
        return
    reduce_total = f"total = hvd.allreduce(torch.tensor(total), op=hvd.{op}).item()"
    assert reduce_total in lines
    # on every rank, after the loop, before the rank-0 print
    assert lines.index(reduce_total) < lines.index("if hvd.rank() == 0:")
    # only the sums the print reads
    assert (f"batches = hvd.allreduce(torch.tensor(batches), op=hvd.{op}).item()" in lines) is ("batches" in divided)


def test_a_sum_of_tensors_leaves_the_loops_sums_alone() -> None:
    source = PRINTED_SUMS.replace("{DIVIDED}", "{total / batches}").replace("total += loss.item()", "total += loss.detach()")
    assert "hvd.allreduce" not in convert(source=source).new


GAN_REBINDING = """\
import torch
import torch.nn as nn


def main():
    G, D = nn.Linear(4, 2), nn.Linear(2, 1)
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    for step in range(100):
        fake = G(torch.randn(8, 4))
        score = D(fake)
        loss_g = -score.mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        score = D(fake.detach())
        loss_d = score.mean() - D(torch.randn(8, 2)).mean()
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()


if __name__ == "__main__":
    main()
"""


def test_a_backward_through_another_optimizers_model_is_synchronized_and_only_that_one() -> None:
    """The generator's loss runs through D: opt_d's all-reduces are completed after it. The
    discriminator's loss reads `score` bound again from `fake.detach()`: it does not reach G."""
    result = convert(source=GAN_REBINDING)
    lines = [line.strip() for line in result.new.splitlines()]
    after_g = lines[lines.index("loss_g.backward()") + 1]
    assert after_g.startswith("opt_d.synchronize()")
    assert lines[lines.index("loss_d.backward()") + 1] == "opt_d.step()"
    assert not any(line.startswith("opt_g.synchronize()") for line in lines)
    assert [f.code for f in result.findings].count("MIG404") == 1
