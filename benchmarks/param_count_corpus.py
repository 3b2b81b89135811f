"""The static parameter count (migrate/param_count.py, what `migrate advise SCRIPT` reads) against
torch's own `sum(p.numel() for p in model.parameters())` for real models of the corpus.

For each script of SPECS, the script and its sibling modules (.corpus/siblings/<id>/) are copied
into a temporary folder, as they lay in their repository, and

- the static count is `migrate.param_count.count_file` of the copy (no torch, nothing run);
- the real count is made in a subprocess that runs none of the script's top level: it parses the
  script, executes only its imports (one that fails is skipped), its class and function
  definitions, and the assignments a spec names (`keep`: configuration constants, at the top level,
  under `if __name__ == "__main__":` or in a function the spec names), then evaluates the spec's
  `build` expressions (the models the script trains, spelled with the script's own argparse
  defaults) and counts their distinct parameters. Datasets are never touched: a value that only
  the data gives (a vocabulary read from a file) is `given` by the spec, and the static count,
  which cannot know it, names those layers as unsized. An audit hook refuses every network
  connection in the subprocess, so nothing is downloaded.

The table: script, model class, static count, real count, the difference in % of the real count,
and the layers the static count said it could not size (`name@line: why`).

Not a test: it needs .corpus (not in CI). Run from the repository root:
    .venv/bin/python benchmarks/param_count_corpus.py [--ids w001,w016] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a file from a checkout: `migrate` is the one beside it

from migrate.records import InputError  # noqa: E402
from migrate.param_count import count_file  # noqa: E402

CORPUS = ROOT / ".corpus"
MANIFEST = ROOT.parent / "shared" / "corpus" / "MANIFEST.tsv"
TIMEOUT = 300  # seconds for one model to be built


@dataclass(frozen=True)
class Spec:
    """How to build one script's trained models without its data (written after reading it)."""

    id: str
    build: tuple[str, ...]  # expressions, each a model the script trains
    keep: tuple[str, ...] = ()  # names whose assignments run before (constants, configuration dicts)
    given: dict[str, object] = field(default_factory=dict)  # values only the data gives
    inside: tuple[str, ...] = ()  # functions whose body holds the `keep` assignments


SPECS = (
    Spec("w001", ("CNN()",)),
    Spec("w002", ("RNN()",), keep=("INPUT_SIZE",)),
    Spec("w003", ("AutoEncoder()",)),
    Spec("w005", ("G", "D"), keep=("N_IDEAS", "ART_COMPONENTS", "G", "D")),
    Spec("w007", ("resnet.resnet32()",)),  # --arch's default
    Spec("w009", ("Seq2Seq()",), keep=("n_step", "n_hidden", "char_arr", "num_dic", "n_class")),
    Spec("w010", ("Transformer()",), keep=("src_vocab", "src_vocab_size", "tgt_vocab", "tgt_vocab_size", "src_len",
                                          "tgt_len", "d_model", "d_ff", "d_k", "d_v", "n_layers", "n_heads")),
    Spec("w011", ("BERT()",), keep=("maxlen", "batch_size", "max_pred", "n_layers", "n_heads", "d_model", "d_ff", "d_k",
                                   "d_v", "n_segments", "text", "sentences", "word_list", "word_dict", "vocab_size")),
    Spec("w014", ("model.RNNModel('LSTM', ntokens, 400, 1150, 3, 0.4, 0.3, 0.65, 0.1, 0.5, True)",
                  "SplitCrossEntropyLoss(400, splits=[], verbose=False)"),
         given={"ntokens": 10000}),  # Penn Treebank's vocabulary (its default --data)
    Spec("w016", ("GPTLanguageModel()",), keep=("block_size", "n_embd", "n_head", "n_layer", "dropout", "device"),
         given={"vocab_size": 65}),  # tiny Shakespeare's characters
    Spec("w017", ("BigramLanguageModel(vocab_size)",), given={"vocab_size": 65}),
    Spec("w018", ("GPTModel(GPT_CONFIG_124M)",), keep=("GPT_CONFIG_124M",)),
    Spec("w023", ("Qnet()",)),
    Spec("w039", ("UNet()",)),
    Spec("w046", ("U2NET(3, 1)",)),  # model_name = 'u2net'
    Spec("w054", ("GPTModel(GPT_CONFIG_124M)",), keep=("GPT_CONFIG_124M",)),
    Spec("w058", ("TinyTransformer()",)),
    Spec("w062", ("NeuralNetwork(num_inputs=2, num_outputs=2)",)),
    Spec("w063", ("TinyTransformer()",)),
)

# Runs in the subprocess: argv = [script, spec as JSON]; prints {"classes": [...], "total": n}.
BUILDER = r'''
import ast, json, sys, types

def refuse(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request"):
        raise RuntimeError("no network in this benchmark")

sys.addaudithook(refuse)
script, spec = sys.argv[1], json.loads(sys.argv[2])
keep, inside = set(spec["keep"]), set(spec["inside"])
tree = ast.parse(open(script, encoding="utf-8").read())

def bound(stmt):
    names = set()
    for node in ast.walk(stmt):
        if isinstance(getattr(node, "ctx", None), ast.Store):
            while isinstance(node, (ast.Subscript, ast.Attribute)):
                node = node.value
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names

def is_main(stmt):
    return isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test)

def chosen(body, top):
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt, True
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if top:
                yield stmt, False
            if stmt.name in inside:
                yield from chosen(stmt.body, False)
        elif is_main(stmt):
            yield from chosen(stmt.body, False)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)) and bound(stmt) & keep:
            yield stmt, False

namespace = {"__name__": "corpus_model", "__file__": script, **spec["given"]}
for stmt, optional in chosen(tree.body, True):
    try:
        exec(compile(ast.Module([stmt], []), script, "exec"), namespace)
    except Exception:
        if not optional:
            raise
seen, classes = {}, []
for expression in spec["build"]:
    model = eval(expression, namespace)
    classes.append(type(model).__name__)
    for p in model.parameters():
        seen[id(p)] = p.numel()
print(json.dumps({"classes": classes, "total": sum(seen.values())}))
'''


@dataclass
class Row:
    id: str
    classes: str = ""
    static: int | None = None
    real: int | None = None
    unsized: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def difference(self) -> str:
        if self.static is None or not self.real:
            return "-"
        return f"{100 * (self.static - self.real) / self.real:+.1f}%"


def original_names() -> dict[str, tuple[str, str]]:
    """Each id's file in .corpus/scripts and the name it had in its repository."""
    with MANIFEST.open(encoding="utf-8") as handle:
        return {r["id"]: (r["file"], Path(r["path"]).name) for r in csv.DictReader(handle, delimiter="\t")}


def laid_out(spec: Spec, folder: Path, names: dict[str, tuple[str, str]]) -> Path:
    """The script copied into `folder` under its own name, its sibling modules beside it."""
    stored, own = names[spec.id]
    siblings = CORPUS / "siblings" / spec.id
    if siblings.is_dir():
        shutil.copytree(siblings, folder, dirs_exist_ok=True)
    script = folder / own
    shutil.copyfile(CORPUS / "scripts" / stored, script)
    return script


def static(row: Row, script: Path) -> None:
    try:
        counted = count_file(str(script))
    except InputError as error:
        row.error = f"static: {error}"
        return
    except Exception as error:  # a crash of the count is a finding of this benchmark, not its end
        row.error = f"static crashed: {type(error).__name__}: {error}"
        return
    row.static = counted.total
    row.unsized = [f"{u.name}@{u.line}: {u.why}" for u in counted.unsized]


def real(row: Row, spec: Spec, script: Path) -> None:
    payload = json.dumps({"build": spec.build, "keep": spec.keep, "given": spec.given, "inside": spec.inside})
    try:
        done = subprocess.run([sys.executable, "-c", BUILDER, str(script), payload], cwd=script.parent,
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env={"PYTHONPATH": str(script.parent), "PATH": "/usr/bin:/bin", "HOME": str(script.parent),
                                   "CUDA_VISIBLE_DEVICES": ""})
    except subprocess.TimeoutExpired:
        row.error += " real: timed out"
        return
    if done.returncode != 0:
        row.error += " real: " + (done.stderr.strip().splitlines() or ["failed"])[-1]
        return
    found = json.loads(done.stdout.strip().splitlines()[-1])
    row.classes, row.real = "+".join(found["classes"]), found["total"]


def measure(spec: Spec, names: dict[str, tuple[str, str]]) -> Row:
    row = Row(spec.id)
    with tempfile.TemporaryDirectory(prefix=f"params-{spec.id}-") as folder:
        script = laid_out(spec, Path(folder), names)
        static(row, script)
        real(row, spec, script)
    return row


def table(rows: list[Row]) -> str:
    lines = ["| script | model class | static | real | difference | not sized by the static count |",
             "|---|---|---:|---:|---:|---|"]
    for row in rows:
        unsized = "; ".join(row.unsized) or "-"
        if row.error:
            unsized += f" ({row.error.strip()})"
        shown = [str(n) if n is not None else "-" for n in (row.static, row.real)]
        lines.append(f"| {row.id} | {row.classes or '-'} | {shown[0]} | {shown[1]} | {row.difference} | {unsized} |")
    exact = sum(1 for r in rows if r.static is not None and r.static == r.real)
    lines.append(f"\n{exact} of {len(rows)} exact")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", help="comma-separated ids (default: every spec)")
    parser.add_argument("--json", action="store_true", help="rows as JSON instead of the table")
    options = parser.parse_args()
    wanted = set(options.ids.split(",")) if options.ids else None
    names = original_names()
    rows = [measure(spec, names) for spec in SPECS if wanted is None or spec.id in wanted]
    if options.json:
        print(json.dumps([{**vars(r), "difference": r.difference} for r in rows], indent=2))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
