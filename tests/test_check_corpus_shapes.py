"""`migrate check` rules narrowed on shapes met in real, already distributed scripts (the corpus):
for each, a small script of our own with the shape (no finding, or a message that says what the
script does) beside one that really has the pitfall (the finding stays)."""

from __future__ import annotations

import textwrap

from migrate.check import check_source

DDP_HEAD = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
"""
SPAWN_HEAD = """
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
"""
HVD_HEAD = """
import torch
import horovod.torch as hvd
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
hvd.init()
model = torch.nn.Linear(2, 2)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
data = torch.utils.data.TensorDataset(torch.randn(32, 2), torch.randn(32, 2))
"""


def found(body: str, head: str = DDP_HEAD) -> list[tuple[str, int]]:
    """(code, line) of each finding, lines counted from the body's first line."""
    skip = head.count("\n")
    code = head + textwrap.dedent(body) + "\ndist.destroy_process_group()\n"
    return [(v.code, v.line - skip) for v in check_source(code, "train.py")]


def messages(body: str, head: str = DDP_HEAD) -> list[str]:
    return [v.message for v in check_source(head + textwrap.dedent(body) + "\ndist.destroy_process_group()\n", "train.py")]


# -- DC401: the process that spawns the ranks prints once ---------------------------------------
SPAWNED = """
def worker(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    print("worker up")
    dist.destroy_process_group()

def launch(world):
    print("starting", world, "workers")
    mp.spawn(worker, args=(world,), nprocs=world)

if __name__ == "__main__":
    print("torch", torch.__version__)
    launch(2)
"""


def test_prints_of_the_spawning_process_are_not_per_rank():
    assert found(SPAWNED, SPAWN_HEAD) == [("DC401", 4)]  # the spawned worker's print only


def test_a_print_above_the_main_guard_runs_in_every_spawned_rank_too():
    body = "print('loading')\n" + SPAWNED
    assert found(body, SPAWN_HEAD) == [("DC401", 1), ("DC401", 5)]


def test_a_function_the_ranks_call_too_is_rank_code():
    body = SPAWNED.replace('    print("worker up")\n', '    launch_note()\n') + \
        "\ndef launch_note():\n    print('note')\n"
    body = body.replace('    launch(2)\n', '    launch_note()\n    launch(2)\n')
    assert [code for code, _ in found(body, SPAWN_HEAD)] == ["DC401"]


def test_a_spawned_function_also_called_in_the_parent_is_rank_code():
    body = SPAWNED.replace("    launch(2)\n", "    worker(0, 1) if torch.cuda.device_count() < 2 else launch(2)\n")
    assert found(body, SPAWN_HEAD) == [("DC401", 4)]


def test_without_a_spawn_the_main_block_runs_on_every_rank():
    body = SPAWNED.replace("    mp.spawn(worker, args=(world,), nprocs=world)\n", "    worker(int(world), 2)\n")
    assert sorted(found(body, SPAWN_HEAD)) == [("DC401", 4), ("DC401", 8), ("DC401", 12)]


def test_a_spawn_of_what_cannot_be_named_claims_no_launcher():
    body = SPAWNED.replace("mp.spawn(worker,", "mp.spawn(lambda r, w: worker(r, w),")
    assert sorted(found(body, SPAWN_HEAD)) == [("DC401", 4), ("DC401", 8), ("DC401", 12)]


def test_a_process_target_is_spawned_too():
    body = SPAWNED.replace("    mp.spawn(worker, args=(world,), nprocs=world)\n",
                           "    for r in range(world):\n        mp.Process(target=worker, args=(r, world)).start()\n")
    assert found(body, SPAWN_HEAD) == [("DC401", 4)]


# -- DC401: a function nothing calls never prints -----------------------------------------------
UNCALLED = """
from transformers import AutoModel

class Net(torch.nn.Module):
    @classmethod
    def from_pretrained(cls, name):
        print("loading", name)
        return AutoModel.from_pretrained(name)

def unused_helper():
    print("never")

model = Net()
"""


def test_prints_in_functions_nothing_calls_are_not_found():
    # `AutoModel.from_pretrained` is the library's method, not a call of Net's
    assert found(UNCALLED) == []


def test_prints_in_the_same_functions_once_called_are_found():
    body = UNCALLED.replace("model = Net()", "model = Net.from_pretrained('x')\nunused_helper()")
    assert found(body) == [("DC401", 7), ("DC401", 11)]


def test_a_function_passed_by_name_or_named_in_a_string_may_run():
    body = UNCALLED.replace("model = Net()", "hooks = [unused_helper]\nfactory = getattr(Net, 'from_pretrained')")
    assert found(body) == [("DC401", 7), ("DC401", 11)]


def test_an_uncalled_instance_method_may_be_a_framework_hook_and_is_kept():
    body = """
    class Callback:
        def on_epoch_end(self, epoch):
            print("epoch", epoch)
    """
    assert found(body) == [("DC401", 4)]


# -- DC402: a file only emptied is told as such --------------------------------------------------
def test_a_file_emptied_on_every_rank_says_so():
    said = messages('with open("log.txt", "w") as f:\n    pass\n')
    assert len(said) == 1 and said[0].startswith("a file emptied on every rank") and "checkpoint" not in said[0]


def test_a_file_written_on_every_rank_keeps_the_torn_file_message():
    said = messages('with open("log.txt", "w") as f:\n    f.write("x")\n')
    assert len(said) == 1 and said[0].startswith("a file opened for writing on every rank")


# -- DC501: a DDP forward under no_grad on rank 0 only -------------------------------------------
EVAL = """
model = DDP(torch.nn.Linear(2, 2))

def evaluate():
    model.eval()
    out = model(torch.ones(1, 2))
    model.train()
    return out

if rank == 0:
    evaluate()
"""


def test_a_ddp_forward_under_no_grad_on_rank_zero_does_not_hang():
    assert found(EVAL.replace("def evaluate", "@torch.no_grad()\ndef evaluate")) == []
    assert found(EVAL.replace("    out = model(", "    with torch.no_grad():\n        out = model(")) == []
    assert found(EVAL.replace("    out = model(", "    with torch.set_grad_enabled(False):\n        out = model(")) == []


def test_a_ddp_forward_with_gradients_on_rank_zero_hangs():
    assert found(EVAL) == [("DC501", 6)]  # the forward, in the function only rank 0 calls
    assert found(EVAL.replace("    out = model(", "    with torch.set_grad_enabled(True):\n        out = model(")) == \
        [("DC501", 7)]


def test_an_fsdp_forward_under_no_grad_on_rank_zero_still_hangs():
    body = """
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    model = FSDP(torch.nn.Linear(2, 2))
    if rank == 0:
        with torch.no_grad():
            out = model(torch.ones(1, 2))
    """
    assert [code for code, _ in found(body)] == ["DC501"]


# -- DC301: a batch size cut per process keeps its learning rate ---------------------------------
HVD_TRAIN = """
batch_size = 256
loader = DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data, hvd.size(), hvd.rank()))
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters())
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def test_horovod_lr_not_scaled_with_a_whole_batch_per_rank_is_found():
    assert [code for code, _ in found(HVD_TRAIN, HVD_HEAD)] == ["DC301"]


def test_horovod_lr_kept_when_the_batch_is_cut_per_process():
    for cut in ("batch_size = int(256 / hvd.size())", "batch_size = 256 // torch.cuda.device_count()",
                "batch_size = 256\nbatch_size //= hvd.size()"):
        assert found(HVD_TRAIN.replace("batch_size = 256", cut), HVD_HEAD) == []


def test_a_figure_saved_on_every_rank_is_a_write_and_under_a_primary_guard_it_is_not() -> None:
    """Seen in a real script: `plt.savefig` on every rank (DC402 missed it), and a project's own
    `dist.is_primary()` helper as the rank-0 guard (not recognised)."""
    every = found("""
        import matplotlib.pyplot as plt
        plt.plot([1, 2])
        plt.savefig("loss.png")
    """)
    assert ("DC402", 4) in every
    guarded = found("""
        import matplotlib.pyplot as plt
        import helpers
        if helpers.is_primary():
            plt.plot([1, 2])
            plt.savefig("loss.png")
            print("saved")
    """)
    assert not [code for code, _ in guarded if code in ("DC401", "DC402")]
