"""Findings say what was seen in the script: the golden cases whose conversion leaves a part to the
user (or refuses the file) report it, at its line, in words that name the script's own code."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate import migrate_source

CASES = Path(__file__).parent / "cases"

EXPECTED = [
    ("ddp/library_module", "MIG119", 15, "`train_one_epoch()` runs backward"),
    ("deepspeed/library_module", "MIG119", 15, "no entry point"),
    ("ddp/loader_elsewhere", "MIG101", 23, "made by `build_train_loader(...)` (line 20) in another module"),
    ("ddp/loader_elsewhere", "MIG101", 23, "`val_loader` (line 21) do not feed backward"),
    ("ddp/streaming_dataset", "MIG111", 23, "built by `ShuffledLineStream(...)` (line 36)"),
    ("ddp/streaming_dataset", "MIG111", 40, "`streaming=True` makes it an IterableDataset"),
    ("ddp/log_files", "MIG120", 31, "its body calls `model(...)`"),
    ("ddp/cycle_loader", "MIG103", 22, "set_epoch"),
    ("ddp/agent_method", "MIG104", 35, "`optimizer` steps the parameters of `agent.net` (line 31), which is called only "
     "through `agent.act(...)` (line 35), which runs `self.net.policy_and_value(...)` (line 25), not through its forward()"),
    ("deepspeed/agent_method", "MIG104", 35, "called only through `agent.act(...)` (line 35)"),
    ("ddp/rank_divergence", "MIG121", 55, "`if loss.item() < args.target_loss:` ... `break` (line 55) leaves the training "
     "loop on a value computed from this rank's own batch (`loss`)"),
    ("ddp/rank_divergence", "MIG121", 55, "the others wait forever in the next gradient all-reduce"),
    ("ddp/rank_divergence", "MIG122", 50, "`while done < micro_steps:` (line 50) repeats training steps at random"),
    ("ddp/rank_divergence", "MIG123", 44, "`model.head.apply(init_weights)` (line 44) draws new weights for `model` after it "
     "is wrapped (the wrapper goes after line 39)"),
    ("ddp/model_at_import", "MIG124", 19, "the model `model` is built at import time (line 19) but training starts in `run()`"),
    ("ddp/data_parallel_two_paths", "MIG003", 34, "removed in 2 places (lines 34, 37)"),
    ("deepspeed/two_optimizers_one_model", "MIG129", 20, "`body_optimizer` and `head_optimizer` each step parameters of `model`"),
    ("ddp/closure_step", "MIG104", 21, "`optimizer.step(...)` (line 21) is given `closure`, a closure that runs the forward "
     "and backward"),
    ("deepspeed/hand_updates", "MIG129", 21, "updated by hand (`parameter -= LEARNING_RATE * parameter.grad`)"),
    ("deepspeed/gan_reused_score", "MIG113", 18, "`critic(painted)` (line 15) feeds both `generator_loss` and the loss "
     "of `critic`'s own backward (line 25)"),
    ("deepspeed/gan_gradients_kept", "MIG113", 28, "`g_loss` leaves gradients on `discriminator`'s weights that no "
     "`zero_grad()` clears before `discriminator`'s next backward"),
    ("deepspeed/gan_frozen_by_hand", "MIG113", 32, "switches `net_d`'s gradients itself (line 8: "
     "`for parameter in module.parameters():`)"),
    ("deepspeed/checkpoint_file_handles", "MIG121", 10, "the gather of `model`'s weights for saving runs only when "
     "`total < best` (line 33) holds"),
    ("deepspeed/optimizer_in_function_global_model", "MIG114", 13, "`optimizer` is built in `fit()` (line 8) while "
     "`model` is built at module level and not handed to that function"),
    ("deepspeed/optimizer_switched_in_training", "MIG129", 23, "`optimizer` is built again during training (line 23: "
     "`optimizer = torch.optim.ASGD(model.parameters(), lr=0.1, t0=0, lambd=0.0)`)"),
    ("ddp/accumulation_leftover_step", "MIG109", 20, "`optimizer.step()` (line 23) steps again after the loop, on the "
     "micro-steps left over"),
    ("fsdp/pickled_model", "MIG303", 18, "pickles the whole module, and a sharded one cannot be pickled"),
    ("fsdp/frozen_and_ema", "MIG307", 47, "`copy.deepcopy(model)` copies the sharded module, after `model` is sharded"),
    ("fsdp/trained_only_dqn", "MIG307", 39, "`zip(model.parameters(), target_net.parameters())` pairs its weights with "
     "another module's"),
    ("fsdp/fsdp_averaged_model", "MIG307", 12, "`AveragedModel(model)` copies the sharded module"),
    ("fsdp/manual_batching", "MIG307", 41, "`model.weight` is taken out of the model as a plain tensor"),
    ("fsdp/checkpoint_file_handles", "MIG121", 10, "under FSDP every rank must take part in the gather"),
    ("fsdp/rank_divergence", "MIG123", 44, "draws new weights for `model` after it is sharded (the shard goes after line 39)"),
    ("fsdp/fsdp_optimizer_before_load", "MIG301", 28, "`Regressor` holds no list of repeated blocks"),
    ("fsdp/already_ddp", "MIG305", 32, "DistributedDataParallel on `model` replaced by FSDP2's fully_shard"),
    ("ddp/self_update", "MIG104", 19, "holds the parameters of `QNet` itself (line 10) and is stepped inside its own "
     "method `QNet.train_net()`, called as `q.train_net(...)` (line 31)"),
]


@pytest.mark.parametrize(("case", "code", "line", "words"), EXPECTED, ids=lambda v: str(v))
def test_the_finding_names_what_was_seen(case: str, code: str, line: int, words: str) -> None:
    target, name = case.split("/")
    result = migrate_source((CASES / name / "input.py").read_text(), target, path="train.py")
    matching = [f for f in result.findings if f.code == code and f.line == line]
    assert matching, [f"{f.line}:{f.col} {f.code} {f.message}" for f in result.findings]
    assert any(words in f.message for f in matching), [f.message for f in matching]


REFUSED = """\
import torch
import torch.nn as nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Linear(4, 1)

    def get_value(self, x):
        return self.critic(x)


def train(agent, optimizer):
    for step in range(100):
        loss = agent.get_value(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


agent = Agent()
train(agent, torch.optim.Adam(agent.parameters(), lr=3e-4))
"""


def test_a_refused_file_keeps_no_setup_findings() -> None:
    """A file a later step leaves unchanged must not report where setup *would* have gone."""
    result = migrate_source(REFUSED, "ddp", path="train.py")
    assert result.new == REFUSED
    codes = {f.code for f in result.findings}
    assert "MIG104" in codes and "MIG108" not in codes


def test_output_outside_the_process_group_asks_the_launcher_for_the_rank() -> None:
    """Output before setup (module level, at import) and after teardown (after `main()` in the
    __main__ block) cannot ask dist.get_rank(): it runs on rank 0 by the launcher's RANK."""
    source = CASES / "helper_entry" / "input.py"
    result = migrate_source(source.read_text(), "ddp", path="train.py")
    lines = result.new.splitlines()
    at = lines.index('    print("torch", torch.__version__)')
    assert lines[at - 1] == 'if os.environ.get("RANK", "0") == "0":'
    done = lines.index('        print("done")')
    assert lines[done - 1] == '    if os.environ.get("RANK", "0") == "0":'
    setup = next(i for i, line in enumerate(lines) if "init_process_group(" in line)
    assert lines.index("    args = get_args()") < setup
    assert all("init_process_group" not in line and "get_rank" not in line for line in lines[: lines.index("def main():")])


SHARED_BUILDER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n):
    data = TensorDataset(torch.randn(n, 3), torch.randn(n, 1))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    return loader


def main():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = make_loader(64)
    val_loader = make_loader(16)
    for epoch in range(2):
        for x, y in train_loader:
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_loader_helper_shared_with_evaluation_is_noted() -> None:
    result = migrate_source(SHARED_BUILDER, "ddp", path="train.py")
    assert "sampler=DistributedSampler(data, shuffle=True)" in result.new
    notes = [f.message for f in result.findings if f.code == "MIG004"]
    assert any("`make_loader()` builds `val_loader` too" in m for m in notes), result.findings


WRITER_READ = """\
import torch
from torch.utils.tensorboard import SummaryWriter


def main():
    writer = SummaryWriter()
    print("logging to", writer.log_dir)
    run_dir = writer.log_dir
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = model(torch.randn(4, 2)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        writer.add_scalar("loss", loss.item(), step)


if __name__ == "__main__":
    main()
"""


def test_every_read_of_a_writer_made_on_rank_0_is_guarded() -> None:
    result = migrate_source(WRITER_READ, "ddp", path="train.py")
    assert "writer = SummaryWriter() if dist.get_rank() == 0 else None" in result.new
    assert ('    if dist.get_rank() == 0:\n        print("logging to", writer.log_dir)\n'
            '        run_dir = writer.log_dir\n') in result.new
    assert not [f for f in result.findings if f.code == "MIG120"], result.findings


def test_a_writer_read_that_cannot_move_to_rank_0_keeps_the_writer_on_every_rank() -> None:
    returned = WRITER_READ.replace('        writer.add_scalar("loss", loss.item(), step)\n',
                                   '        writer.add_scalar("loss", loss.item(), step)\n    return run_dir\n')
    result = migrate_source(returned, "ddp", path="train.py")
    assert "    writer = SummaryWriter()\n" in result.new
    [found] = [f for f in result.findings if f.code == "MIG120"]
    assert found.line == 17 and "`return run_dir` reads `run_dir` (bound from `writer.log_dir`, line 8)" in found.message
