"""Issue 24, patterns 6 and 13: the wrapper lands on the trained model and nothing else, the
model reaches helpers of other modules as they can read it, and refusals say what blocks and what
to do without sending the user elsewhere and back. Conversions only (no process is launched)."""

from __future__ import annotations

from pathlib import Path

from migrate import FileResult, migrate_paths, migrate_source
from migrate.project_files import read_from_disk

HEAD = '''import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.n_classes = 2
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)

'''

EVAL_COPY = HEAD + '''
def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    shadow = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        shadow.load_state_dict(model.state_dict())


if __name__ == "__main__":
    main()
'''


def messages(result, code: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.message for f in result.findings if f.code == code]


def test_an_evaluation_copy_made_after_the_wrap_copies_the_module_not_the_wrapper() -> None:
    new = migrate_source(EVAL_COPY, "ddp").new
    assert "    model = DDP(model)\n    shadow = copy.deepcopy(model.module)\n" in new
    assert "shadow.load_state_dict(model.module.state_dict())" in new


HELPER = '''def evaluate(net, loader):
    hits = 0
    for x, y in loader:
        hits += (net(x).argmax(1) == y).sum().item() / net.n_classes
    return hits


def penalty(net, x):
    return net(x).pow(2).mean() * net.n_classes


def size(net):
    return sum(p.numel() for p in net.parameters())
'''

USES_HELPERS = HEAD.replace("import copy\n\n", "") + '''from helpers import evaluate, penalty, size


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    n = size(model)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y) + penalty(model, x)
            loss.backward()
            optimizer.step()
        score = evaluate(model, loader=loader)
        torch.save({"score": score, "n": n}, "score.pt")


if __name__ == "__main__":
    main()
'''


def test_a_helper_of_another_module_that_reads_attributes_gets_the_module(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(HELPER)
    result = migrate_source(USES_HELPERS, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert "score = evaluate(model.module, loader=loader)" in result.new
    assert "n = size(model)" in result.new  # reads only what the wrapper answers
    # in the training loop the module would run past the wrapper: reported, left as it was
    assert "+ penalty(model, x)" in result.new
    [warning] = [m for m in messages(result, "MIG105") if "penalty()" in m]
    assert "`penalty()` of helpers.py reads `net.n_classes`" in warning
    assert 'getattr(net, "module", net)' in warning


AVERAGER = '''class Averager:
    def __init__(self, decay):
        self.decay = decay
        self.calls = 0

    def update(self, average, live):
        if self.calls == 0:
            self.copy_weights(average, live)
        else:
            for mine, theirs in zip(average.parameters(), live.parameters()):
                mine.data.mul_(self.decay).add_(theirs.data, alpha=1 - self.decay)
        self.calls += 1

    def copy_weights(self, average, live):
        average.load_state_dict(live.state_dict())


class Scorer:
    def __init__(self, x):
        self.x = x

    def score(self, net):
        return net(self.x).sum().item() * net.n_classes
'''

USES_AVERAGER = HEAD + '''from averaging import Averager, Scorer


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    average = copy.deepcopy(model).requires_grad_(False)
    averager = Averager(0.99)
    scorer = Scorer(torch.randn(4, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            averager.update(average, model)
            scorer.score(model)
    torch.save(average.state_dict(), "average.pt")


if __name__ == "__main__":
    main()
'''


def test_a_method_of_an_imported_class_gets_the_module_when_it_only_reads_weights(tmp_path: Path) -> None:
    """`averager.update(average, model)` in the step loop: Averager (another module) copies the
    weights through a second method (`live.state_dict()`, whose keys carry `module.` through the
    wrapper) and never runs the model, so it is handed `model.module`; `scorer.score(model)` runs
    the model and reads `net.n_classes`: handing it the module would skip the wrapper, so MIG105."""
    (tmp_path / "averaging.py").write_text(AVERAGER)
    result = migrate_source(USES_AVERAGER, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert "            averager.update(average, model.module)\n" in result.new
    assert "            scorer.score(model)\n" in result.new
    [warning] = messages(result, "MIG105")
    assert warning.startswith("`Scorer.score()` of averaging.py reads `net.n_classes` on the model it is handed")


def test_converting_text_reads_no_module_unless_handed_a_reader(tmp_path: Path) -> None:
    """migrate_source is a function of the text: the helper module beside `path` is seen only
    through the reader the caller passes (migrate_paths and the CLI pass the disk's)."""
    (tmp_path / "helpers.py").write_text(HELPER)
    alone = migrate_source(USES_HELPERS, "ddp", path=str(tmp_path / "train.py"))
    assert "evaluate(model, loader=loader)" in alone.new and not messages(alone, "MIG105")
    handed = migrate_source(USES_HELPERS, "ddp", path=str(tmp_path / "train.py"),
                            read_module={str(tmp_path / "helpers.py"): HELPER}.get)
    assert "score = evaluate(model.module, loader=loader)" in handed.new
    (tmp_path / "train.py").write_text(USES_HELPERS)
    [from_disk] = migrate_paths([str(tmp_path / "train.py")], "ddp")
    assert isinstance(from_disk, FileResult) and from_disk.new == handed.new


def test_without_the_module_file_nothing_is_routed(tmp_path: Path) -> None:
    result = migrate_source(USES_HELPERS, "ddp", path=str(tmp_path / "train.py"))
    assert "evaluate(model, loader=loader)" in result.new and not messages(result, "MIG105")


def test_mig002_and_mig119_each_say_what_to_do_without_pointing_at_the_other() -> None:
    launcher = "import torch\n\nfrom trainer import fit\n\nfit(torch.nn.Linear(2, 1))\n"
    library = ("import torch\n\n\ndef fit(model):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
               "    model(torch.randn(2, 2)).sum().backward()\n    opt.step()\n")
    [mig002] = messages(migrate_source(launcher, "ddp"), "MIG002")
    [mig119] = messages(migrate_source(library, "ddp"), "MIG119")
    assert 'give it an `if __name__ == "__main__":` block that calls its training function' in mig002
    assert 'give this file an entry point (an `if __name__ == "__main__":` block that calls `fit()`)' in mig119
    assert "launch this file itself" in mig119
    assert "the script that calls it" not in mig119 and "imports" not in mig119.split("Left unchanged")[1]


PER_STEP = HEAD.replace("import copy\n\n", "") + '''
def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(50):
        x, y = next(iter(loader))
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_per_step_loop_sets_the_epoch_before_each_new_iterator() -> None:
    """`next(iter(loader))` per step: each new iterator gets a number of its own, as each of the
    original's reshuffled."""
    result = migrate_source(PER_STEP, "ddp")
    assert "        loader.sampler.set_epoch(step)\n        x, y = next(iter(loader))\n" in result.new
    assert not messages(result, "MIG103")


PER_EPOCH_ITERATOR = PER_STEP.replace("""    for step in range(50):
        x, y = next(iter(loader))
""", """    for epoch in range(3):
        batches = iter(loader)
        i = 0
        while i < len(loader):
            x, y = next(batches)
            i += 1
""").replace("        optimizer.zero_grad()\n        nn.functional.cross_entropy(model(x), y).backward()\n        optimizer.step()\n",
             "            optimizer.zero_grad()\n            nn.functional.cross_entropy(model(x), y).backward()\n            optimizer.step()\n")


def test_an_iterator_made_once_per_epoch_gets_set_epoch_right_above_it() -> None:
    """A WGAN's `data_iter = iter(dataloader)` at the top of each epoch, drawn from in a `while`."""
    result = migrate_source(PER_EPOCH_ITERATOR, "ddp")
    assert "        loader.sampler.set_epoch(epoch)\n        batches = iter(loader)\n" in result.new
    assert not messages(result, "MIG103")


HANDED = '''import torch
import torch.nn as nn


class RF:
    def __init__(self, net):
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)


def main():
    model = nn.Linear(8, 2).cuda()
    rf = RF(model)
    for _ in range(10):
        rf.opt.zero_grad()
        model(torch.randn(4, 8).cuda()).pow(2).mean().backward()
        rf.opt.step()


if __name__ == "__main__":
    main()
'''


def test_mig114_names_the_call_the_model_is_handed_to() -> None:
    result = migrate_source(HANDED, "deepspeed")
    [warning] = messages(result, "MIG114")
    assert result.new == HANDED
    assert "`rf.opt` is not built beside `model` (in `main()`); `model` is handed to `rf = RF(model)` (line 12)" in warning
    assert "build the optimizer beside the model" in warning


SPLIT_LOSS = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class TailLoss(nn.Module):
    def __init__(self, width, tails):
        super().__init__()
        self.tails = tails
        if tails > 0:
            self.tail = nn.Parameter(torch.zeros(tails, width))

    def forward(self, hidden, target):
        loss = nn.functional.mse_loss(hidden, target)
        if self.tails > 0:
            loss = loss + self.tail.pow(2).sum()
        return loss


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 4)), batch_size=8, shuffle=True)
    model = nn.Linear(8, 4)
    criterion = TailLoss(4, tails=0)
    optimizer = torch.optim.SGD(list(model.parameters()) + list(criterion.parameters()), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    print(criterion.tails)
    torch.save(criterion.state_dict(), "criterion.pt")


if __name__ == "__main__":
    main()
'''


def test_a_module_that_makes_its_parameters_only_under_a_condition_is_wrapped_only_when_it_has_them() -> None:
    """DDP raises for a module without a parameter that requires a gradient ("DistributedDataParallel
    is not needed ..."): TailLoss makes its only parameter when `tails > 0`. The wrap is guarded, and
    the later reads reach the module whether or not it was wrapped."""
    new = migrate_source(SPLIT_LOSS, "ddp").new
    assert ("    if any(p.requires_grad for p in criterion.parameters()):  # TailLoss makes its parameters only when "
            "`tails > 0`; DDP refuses a module without any\n        criterion = DDP(criterion)\n") in new
    assert '    print(getattr(criterion, "module", criterion).tails)\n' in new
    assert '    torch.save(getattr(criterion, "module", criterion).state_dict(), "criterion.pt")\n' in new


SAMPLER_MODULE = '''import torch


def sample(net, steps):
    state = net.init_state(1)
    out = []
    for _ in range(steps):
        state = net(torch.randn(1, 8)) + state
        out.append(state.sum().item())
    return out
'''

USES_SAMPLER = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from sampling import *


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def init_state(self, n):
        return torch.zeros(n, 2)

    def forward(self, x):
        return self.fc(x)


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        print(sample(model, 3))


if __name__ == "__main__":
    main()
'''


def test_a_star_imported_helper_that_only_feeds_a_print_gets_the_module(tmp_path: Path) -> None:
    """`from sampling import *`, then `print(sample(model, 3))` in the epoch loop (w015's
    `generate(decoder, ...)`): sample() reads `net.init_state`, which the wrapper does not answer;
    what it returns is only printed, so it runs the module itself, past the wrapper."""
    (tmp_path / "sampling.py").write_text(SAMPLER_MODULE)
    result = migrate_source(USES_SAMPLER, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert "sample(model.module, 3)" in result.new
    assert not messages(result, "MIG105")


PREFETCHED = HEAD.replace("import copy\n\n", "") + '''
class Prefetcher:
    def __init__(self, loader):
        self.batches = iter(loader)

    def next(self):
        return next(self.batches, None)


def train(model, optimizer, prefetcher):
    batch = prefetcher.next()
    while batch is not None:
        x, y = batch
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        batch = prefetcher.next()


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        train(model, optimizer, Prefetcher(loader))


if __name__ == "__main__":
    main()
'''


def test_mig103_names_the_loop_that_holds_the_backward_when_it_iterates_no_dataloader() -> None:
    [warning] = messages(migrate_source(PREFETCHED, "ddp"), "MIG103")
    assert warning.startswith("the backward pass at line 29 runs in the loop at line 26 (`while batch is not None:`), "
                              "which does not iterate a DataLoader this tool can follow"), warning
