"""Defects a review found on real projects, shown on one-file scripts of the same shape:

- DeepSpeed's engine is made after the optimizer, at the end of a class's `__init__`; a method that
  `__init__` calls before that (copying the online network into a target network) runs on the
  plain module there and on the engine later, so it reaches the module as
  `getattr(net, "module", net)`, never `net.module` (AttributeError on the plain module).
- `torch.load(..., map_location="cuda:0")` becomes this rank's device, never a name the
  conversion keeps a bare index (torch.load calls an int map_location: TypeError).
- `torch.device("cuda")` under `if torch.cuda.is_available() and ...:` is left as it is: there CUDA
  is there, and setup made "cuda" this rank's GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from migrate import DdpOptions, DeepSpeedOptions
from migrate.api import migrate_source
from migrate.records import FileResult

AGENT = '''\
import argparse

import torch
import torch.nn as nn


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 3)

    def forward(self, x):
        return self.body(x)

    def resample(self):
        nn.init.normal_(self.body.bias, std=0.01)


class Learner:
    def __init__(self, lr):
        self.online_net = QNet()
        self.target_net = QNet()
        self.sync_target()
        self.refresh()
        for p in self.target_net.parameters():
            p.requires_grad = False
        self.optimiser = torch.optim.Adam(self.online_net.parameters(), lr=lr)

    def sync_target(self):
        self.target_net.load_state_dict(self.online_net.state_dict())

    def refresh(self):
        self.online_net.resample()

    def learn(self, x, y):
        loss = ((self.online_net(x) - self.target_net(x).detach() - y) ** 2).mean()
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()
        return loss.item()

    def save(self, path):
        torch.save(self.online_net.state_dict(), path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    learner = Learner(0.01)
    for step in range(args.steps):
        x, y = torch.randn(4, 6), torch.randn(4, 3)
        learner.learn(x, y)
        if step % 2 == 0:
            learner.sync_target()
            learner.online_net.resample()
    learner.save("online.pt")
    print("synced", all(torch.equal(a, b) for a, b in zip(learner.online_net.parameters(), learner.target_net.parameters())))


if __name__ == "__main__":
    main()
'''

BOTH_WAYS = 'getattr(self.online_net, "module", self.online_net)'


def deepspeed(source: str, zero: int = 2) -> FileResult:
    result = migrate_source(source, "deepspeed", DeepSpeedOptions(zero=zero), path="agent.py")
    assert not result.error and not result.skipped, result.findings
    return result


def method(text: str, name: str) -> str:
    """The lines of one method of the converted text's Learner."""
    learner = text[text.index("class Learner"):]
    found = re.search(rf"\n    def {name}\(.*?(?=\n    def |\n\n\ndef |\Z)", learner, re.S)
    assert found, name
    return found.group(0)


def test_a_method_init_calls_before_the_engine_reaches_the_module_either_way() -> None:
    new = deepspeed(AGENT).new
    # the engine is made after the optimizer, below the calls in __init__
    init = method(new, "__init__")
    assert init.index("self.sync_target()") < init.index("deepspeed.initialize(")
    sync = method(new, "sync_target")
    assert "self.online_net.module" not in sync
    assert f"list({BOTH_WAYS}.parameters())" in sync  # the ZeRO-3 gather, a no-op on the plain module
    assert f"{BOTH_WAYS}.state_dict()" in sync
    assert "runs before deepspeed.initialize" in sync  # the reader is told why
    refresh = method(new, "refresh")
    assert f"{BOTH_WAYS}.resample()" in refresh


def test_uses_that_run_only_after_the_engine_still_go_through_module() -> None:
    new = deepspeed(AGENT).new
    assert "self.online_net.module.state_dict()" in method(new, "save")
    assert "learner.online_net.module.resample()" in new
    assert "getattr(learner.online_net" not in new


def test_without_an_early_call_the_method_keeps_module() -> None:
    source = AGENT.replace("        self.sync_target()\n        self.refresh()\n", "")
    new = deepspeed(source).new
    assert "getattr(" not in method(new, "sync_target")
    assert "self.online_net.module.state_dict()" in method(new, "sync_target")


def test_ddp_wraps_before_the_early_call_and_keeps_module() -> None:
    """DDP wraps the model where it is built, before the calls: `.module` is right there."""
    result = migrate_source(AGENT, "ddp", DdpOptions(), path="agent.py")
    assert "self.online_net.module.state_dict()" in method(result.new, "sync_target")
    assert "getattr(" not in result.new


def test_the_getattr_spelling_reads_the_plain_module_and_a_wrapped_one() -> None:
    """What the converted line evaluates to, before and after the engine (any object with `.module`)."""
    net = torch.nn.Linear(2, 2)

    class Holder:
        online_net: object = net

    reach = eval(BOTH_WAYS.replace("self.", "holder."), {"holder": Holder})  # noqa: S307
    assert reach is net

    class Engine:
        module = net

    Holder.online_net = Engine()
    assert eval(BOTH_WAYS.replace("self.", "holder."), {"holder": Holder}) is net  # noqa: S307


@pytest.mark.slow
@pytest.mark.full
def test_the_converted_agent_starts_and_trains_under_deepspeed(tmp_path: Path) -> None:
    """Two ranks on the CPU: __init__ copies the weights before the engine exists, training syncs
    them through the engine later; the original failed at start-up with AttributeError."""
    from tests.equivalence.harness import launch_deepspeed

    script = tmp_path / "agent.py"
    result = migrate_source(AGENT, "deepspeed", DeepSpeedOptions(zero=2), path=str(script))
    script.write_text(result.new)
    for artifact in result.artifacts:
        Path(artifact.path).write_text(artifact.text)
    run = launch_deepspeed(script, 2, [])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "has no attribute 'module'" not in run.stderr
    assert (tmp_path / "online.pt").is_file()


# -- map_location ---------------------------------------------------------------------------------

GAN = '''\
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, cuda):
        self.cuda_index = 0
        self.net = nn.Linear(4, 1)
        if cuda:
            self.net.cuda(self.cuda_index)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def train(self, loader):
        for x, y in loader:
            loss = nn.functional.mse_loss(self.net(x.cuda(self.cuda_index)), y.cuda(self.cuda_index))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def load_model(self, path):
        self.net.load_state_dict(torch.load(path, map_location="cuda:0"))


def main():
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    trainer = Trainer(torch.cuda.is_available())
    if os.path.exists("net.pt"):
        trainer.load_model("net.pt")
    trainer.train(loader)


if __name__ == "__main__":
    main()
'''


def map_location_of(text: str) -> str:
    found = re.search(r"map_location=(.*)\)\)\n", text)
    assert found, text
    return found.group(1)


def test_a_load_to_gpu_0_maps_to_this_rank_s_gpu_never_to_an_index() -> None:
    new = migrate_source(GAN, "ddp", DdpOptions(), path="train.py").new
    # the class's index is kept for `.to(...)`, which takes one
    assert ".to(self.cuda_index)" in new
    location = map_location_of(new)
    assert "cuda_index" not in location
    # evaluated as rank 1 of a GPU host would: a device, cuda:1 (torch.device needs no GPU to be made)
    namespace = {"torch": _CudaTorch(), "os": _Os({"LOCAL_RANK": "1"}), "local_rank": 1}
    value = eval(location, namespace)  # noqa: S307
    assert not isinstance(value, int)
    assert torch.device(value) == torch.device("cuda", 1)


def test_a_load_to_gpu_0_under_deepspeed_maps_to_this_rank_s_gpu_too() -> None:
    new = migrate_source(GAN, "deepspeed", DeepSpeedOptions(), path="train.py").new
    assert "cuda_index" not in map_location_of(new)


class _CudaTorch:
    """`torch` as a GPU host answers: CUDA there; everything else is torch's."""

    class cuda:  # noqa: N801 - spelled as the module it stands for
        @staticmethod
        def is_available() -> bool:
            return True

    def __getattr__(self, name: str) -> object:
        return getattr(torch, name)


class _Os:
    def __init__(self, environ: dict[str, str]) -> None:
        self.environ = environ


# -- "cuda" where CUDA is known to be there -------------------------------------------------------

FLAGGED = '''\
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--disable-cuda", action="store_true")
    args = parser.parse_args()
    if torch.cuda.is_available() and not args.disable_cuda:
        args.device = torch.device('cuda')
    else:
        args.device = torch.device('cpu')
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    model = nn.Linear(4, 1).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x.to(args.device)), y.to(args.device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_cuda_inside_an_is_available_branch_is_left_as_it_is() -> None:
    new = migrate_source(FLAGGED, "ddp", DdpOptions(), path="train.py").new
    assert "        args.device = torch.device('cuda')\n" in new
    assert "torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")" not in new


def test_cuda_outside_such_a_branch_still_gets_its_cpu_fallback() -> None:
    source = FLAGGED.replace("if torch.cuda.is_available() and not args.disable_cuda:", "if not args.disable_cuda:")
    new = migrate_source(source, "ddp", DdpOptions(), path="train.py").new
    assert 'args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in new


DEVICE_CONTEXT = '''import argparse
import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-index", type=int, default=0)
    args = parser.parse_args()
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.cuda.device(args.gpu_index):
        for step in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_cuda_device_context_names_the_rank_s_gpu() -> None:
    # `with torch.cuda.device(args.gpu_index):` (default 0) put every rank on GPU 0, over set_device
    assert "    with torch.cuda.device(local_rank):\n" in migrate_source(DEVICE_CONTEXT, "ddp").new
