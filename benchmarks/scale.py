"""How conversion time grows with file size, printed, not asserted.

Generates big training scripts of four shapes, each with a real training loop (model,
optimizer, DataLoader, `loss.backward()`, `optimizer.step()`) so the whole conversion runs:

  module     training code at module level among thousands of assignments, calls, prints and
             instances of classes defined in the file (`t_i = Trainer_i(...)`, `t_i.run()`)
  chain      thousands of small functions calling each other, defined callee last, so finding
             the scopes that lead to training takes one round per link if done naively; each
             link also calls a method of an instance of a class of the file (`helper.log(...)`)
  long_loop  one training function whose loop body holds thousands of statements
  classes    many classes with methods (modules with `__init__`/`forward`, helpers calling
             each other through `self`)
  steps      (not run by default) one function with thousands of the sites the rewrite steps
             handle: files written, directories made, `.cuda()`, prints, logging, checkpoints
             saved and loaded again, evaluation loaders

For each shape and size it prints the lines, the seconds `migrate_source(code, target)` takes,
ms per 1k lines, the same for libcst's parse + code generation (`cst.parse_module(code).code`),
and the ratio of the two. Linear conversion shows as a flat ms/1k-lines column. A conversion
that is skipped or changes nothing is flagged: it would not be measuring the full pipeline.
With --diff, a last column gives the seconds printing the diff takes (before its lines were
matched patience-style, long_loop at 20k lines took 14 s there; see migrate/report.py).

Run: .venv/bin/python benchmarks/scale.py [--sizes 1000,5000] [--target ddp] [--shapes chain,classes] [--repeat 3] [--diff]
The default (sizes 1k, 5k, 20k, 50k; ddp on every shape, deepspeed on `module` too; best of 3
up to 5k lines, one run above) takes about 4 minutes on a 2-core machine, most of it in the
50k-line files: libcst alone needs 5-10 s to parse and print one of those. Even when every pass
is linear, ms per 1k lines rises somewhat with size (for libcst too), less so because both are
timed with Python's cycle collector paused, as `migrate` pauses it while a file converts (each
collection would scan the whole live tree again); compare the ratio column across sizes.
"""

from __future__ import annotations

import argparse
import gc
import textwrap
import time
from collections.abc import Callable

import libcst as cst

from migrate.api import _collector_paused, migrate_source
from migrate.records import FileResult
from migrate.report import result_diff

HEADER = '''"""Generated training script ({shape}, about {lines} lines)."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


'''

LOADER = '''parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dataset = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
train_loader = DataLoader(dataset, batch_size=8, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
criterion = nn.MSELoss()
'''

LOOP = '''{indent}for epoch in range(args.epochs):
{indent}    for x, y in train_loader:
{indent}        x, y = x.to(device), y.to(device)
{indent}        optimizer.zero_grad()
{indent}        loss = criterion(model(x), y)
{indent}        loss.backward()
{indent}        optimizer.step()
{indent}    print(f"epoch {{epoch}} loss {{loss.item():.4f}}")
'''


def module_shape(units: int) -> str:
    """Module-level training among many module-level statements and classes of the file."""
    parts = [LOADER]
    for i in range(units):
        parts.append(
            f"\n\nclass Trainer_{i}:\n"
            f"    def __init__(self, scale):\n"
            f"        self.scale = scale * {i}\n\n"
            f"    def run(self, value):\n"
            f"        return value * self.scale\n\n\n"
            f"t_{i} = Trainer_{i}({i})\n"
            f"x_{i} = model(torch.randn(2, 8).to(device))\n"
            f"y_{i} = t_{i}.run(x_{i}.sum().item())\n"
            f'print("unit {i}", y_{i})\n'
        )
    parts.append("\n" + LOOP.format(indent=""))
    parts.append('torch.save(model.state_dict(), "model.pt")\n')
    return "".join(parts)


def chain_shape(units: int) -> str:
    """f_{n-1} calls ... f_0 calls train(); defined callee last, so each link is found late. Each
    link also calls a method of an instance of a class of the file (`helper.log(...)`)."""
    parts = ["class Helper:\n    def __init__(self, step):\n        self.step = step\n\n"
             "    def log(self, value):\n        return value + self.step\n\n\n"]
    for i in reversed(range(1, units)):
        parts.append(
            f"def f_{i}(step):\n    helper = Helper(step)\n    value = helper.log({i})\n    return f_{i - 1}(value)\n\n\n"
        )
    parts.append("def f_0(step):\n    return train(step)\n\n\n")
    parts.append("def train(step):\n" + textwrap.indent(LOADER, "    ") + LOOP.format(indent="    "))
    parts.append("    return model\n\n\n")
    parts.append(f'def main():\n    f_{units - 1}(0)\n\n\nif __name__ == "__main__":\n    main()\n')
    return "".join(parts)


def long_loop_shape(units: int) -> str:
    """One function; its inner training loop holds thousands of statements."""
    body = ["def main():\n", textwrap.indent(LOADER, "    ")]
    body.append("    stats = {}\n    for epoch in range(args.epochs):\n        for x, y in train_loader:\n")
    body.append("            x, y = x.to(device), y.to(device)\n            optimizer.zero_grad()\n")
    body.append("            loss = criterion(model(x), y)\n            loss.backward()\n            optimizer.step()\n")
    for i in range(units):
        body.append(
            f"            h_{i} = x.mean() * {i} + y.sum()\n"
            f'            stats["s_{i}"] = h_{i}.item()\n'
            f"            if h_{i} > {i}:\n"
            f'                print("big", epoch, h_{i})\n'
        )
    body.append('        print(f"epoch {epoch} loss {loss.item():.4f}")\n')
    body.append('    torch.save(model.state_dict(), "model.pt")\n\n\nif __name__ == "__main__":\n    main()\n')
    return "".join(body)


def classes_shape(units: int) -> str:
    """Many nn.Module classes with methods, and a Trainer class that runs the loop."""
    parts = []
    for i in range(units):
        parts.append(
            f"class Block_{i}(nn.Module):\n"
            f"    def __init__(self, width):\n"
            f"        super().__init__()\n"
            f"        self.linear = nn.Linear(width, width)\n"
            f"        self.scale = {i}\n\n"
            f"    def forward(self, x):\n"
            f"        return self.helper(self.linear(x))\n\n"
            f"    def helper(self, x):\n"
            f"        return x * self.scale\n\n\n"
        )
    parts.append(
        "class Trainer:\n"
        "    def __init__(self, model, optimizer, loader, device):\n"
        "        self.model = model\n        self.optimizer = optimizer\n"
        "        self.loader = loader\n        self.device = device\n\n"
        "    def step(self, x, y):\n"
        "        self.optimizer.zero_grad()\n"
        "        loss = nn.functional.mse_loss(self.model(x), y)\n"
        "        loss.backward()\n        self.optimizer.step()\n        return loss.item()\n\n"
        "    def train(self, epochs):\n"
        "        for epoch in range(epochs):\n"
        "            for x, y in self.loader:\n"
        "                self.step(x.to(self.device), y.to(self.device))\n\n\n"
    )
    blocks = ", ".join(f"Block_{i}(8)" for i in range(min(units, 8)))
    parts.append(
        "def main():\n"
        + textwrap.indent(LOADER.replace("nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)", f"{blocks}, nn.Linear(8, 1)"), "    ")
        + "    trainer = Trainer(model, optimizer, train_loader, device)\n"
        "    trainer.train(args.epochs)\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    return "".join(parts)


STEPS_UNIT = '''    os.makedirs("out_{i}")
    log_{i} = open("log_{i}.txt", "w")
    log_{i}.write("unit {i}\\n")
    log_{i}.close()
    t_{i} = torch.zeros(3).cuda()
    u_{i} = torch.ones(3, device="cuda:0")
    print(fmt(t_{i}.sum().item()))
    logger.info("unit %d", {i})
    if args.epochs > {i}:
        print("more epochs than", {i})
    torch.save(model.state_dict(), "ckpt_{i}.pt")
    state_{i} = torch.load("ckpt_{i}.pt")
    val_loader_{i} = DataLoader(dataset, batch_size=8)
'''


def steps_shape(units: int) -> str:
    """One function with thousands of the sites the rewrite steps handle: directories made, files
    opened and written, `.cuda()` and numbered devices, prints and logging, checkpoints saved and
    loaded again, evaluation loaders, a loader fed `**kwargs`."""
    head = (
        "import logging\nimport os\n\nfrom tqdm import tqdm\n\nlogger = logging.getLogger(__name__)\n\n\n"
        "def fmt(value):\n    return f\"{value:.3f}\"\n\n\n"
        "def main():\n" + textwrap.indent(LOADER, "    ").replace(
            "train_loader = DataLoader(dataset, batch_size=8, shuffle=True)",
            'kwargs = {"batch_size": 8, "shuffle": True}\n    train_loader = DataLoader(dataset, **kwargs)',
        ).replace(".to(device)\n", ".cuda()\n", 1)
    )
    loop = LOOP.format(indent="    ").replace("in train_loader:", "in tqdm(train_loader):")
    tail = '    torch.save(model.state_dict(), "model.pt")\n\n\nif __name__ == "__main__":\n    main()\n'
    return head + "".join(STEPS_UNIT.format(i=i) for i in range(units)) + loop + tail


SHAPES: dict[str, Callable[[int], str]] = {
    "module": module_shape,
    "chain": chain_shape,
    "long_loop": long_loop_shape,
    "classes": classes_shape,
    "steps": steps_shape,
}
DEFAULT_SHAPES = ("module", "chain", "long_loop", "classes")


def script(shape: str, lines: int) -> str:
    """A script of the shape with about `lines` lines (units sized from a small sample)."""
    build = SHAPES[shape]
    small, large = build(10), build(20)
    per_unit = max(1, (large.count("\n") - small.count("\n")) / 10)
    units = max(2, round((lines - small.count("\n")) / per_unit) + 10)
    code = HEADER + build(units)
    return code.replace("{shape}", shape, 1).replace("{lines}", str(code.count("\n")), 1)


def seconds(action: Callable[[], object]) -> float:
    """Wall time of one call, after a full garbage collection (so one run does not pay for the
    last), with the cycle collector paused during the call as the command line pauses it."""
    gc.collect()
    with _collector_paused():
        start = time.perf_counter()
        action()
        return time.perf_counter() - start


def measure(shape: str, lines: int, target: str, repeat: int, diff: bool = False) -> None:
    """One row: the best of `repeat` runs each of parse+codegen and of the conversion, interleaved;
    with `diff`, also the seconds printing the diff takes (migrate.report.result_diff)."""
    code = script(shape, lines)
    count = code.count("\n")
    results: list[FileResult] = []
    baseline = convert = float("inf")
    try:
        for _ in range(repeat):
            baseline = min(baseline, seconds(lambda: cst.parse_module(code).code))
            convert = min(convert, seconds(lambda: results.append(migrate_source(code, target, path=f"{shape}.py"))))
    except (RecursionError, MemoryError) as error:  # printed, not raised: the other sizes still run
        print(f"{shape:10} {target:9} {count:7d}  failed: {type(error).__name__}", flush=True)
        return
    result = results[-1]
    flag = "" if not result.skipped and result.new != result.old else "  (NOT CONVERTED: skipped or unchanged)"
    shown = f" {seconds(lambda: result_diff(result)):7.2f}" if diff else ""
    print(
        f"{shape:10} {target:9} {count:7d} {convert:9.2f} {convert * 1e6 / count:10.1f} "
        f"{baseline:9.2f} {baseline * 1e6 / count:10.1f} {convert / baseline:6.2f}{shown}{flag}",
        flush=True,
    )


def warm_up(shape: str, target: str) -> None:
    """Convert a small script once first: imports and parsed templates are not part of the figures."""
    migrate_source(script(shape, 200), target, path=f"{shape}.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000,50000", help="target line counts, comma separated")
    parser.add_argument("--target", default=None, help="ddp or deepspeed (default: ddp everywhere, deepspeed on `module` too)")
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help="comma separated: " + ", ".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for files up to 5k lines (bigger: one run)")
    parser.add_argument("--diff", action="store_true", help="also time printing the diff (a last column, diff s)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    runs = [(shape, args.target or "ddp") for shape in shapes]
    if args.target is None and "module" in shapes:
        runs.append(("module", "deepspeed"))
    print(f"{'shape':10} {'target':9} {'lines':>7} {'convert s':>9} {'ms/1k ln':>10} {'parse+gen':>9} {'ms/1k ln':>10} {'ratio':>6}" + (f" {'diff s':>7}" if args.diff else ""))
    for shape, target in runs:
        warm_up(shape, target)
        for lines in sizes:
            measure(shape, lines, target, args.repeat if lines <= 5000 else 1, args.diff)


if __name__ == "__main__":
    main()
