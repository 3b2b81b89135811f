"""The checks of `migrate verify`, computed from what each rank recorded (no torch needed here).

1. every rank starts and reaches N steps            (`steps`; with --to-end: and ends without error)
2. no rank waits forever                           (`hang`)
3. parameters identical across ranks after a step  (`parameters`: full parameters, FSDP2 and ZeRO-3
                                                    shards gathered on every rank)
4. ranks train on different samples                (`data`)
5. output and files on rank 0 only                 (`rank_zero`: whatever printed or wrote it,
                                                    with the user's line; folders made are allowed)
6. checkpoints keep the original's layout          (`checkpoint`)
7. with --compare: losses and weights match the original's, and every parameter that trains in
   the original trains in the converted run, and the other way round (`compare`, by name)

A step is an optimizer's step, or (no optimizer stepping) a change of the trained parameters
between two forwards: a hand-written update.

Each check says what was seen and where (`file:line` in the converted script, with the line; a
rank that waits is named with the user's file and line where it waits). An original script that
hangs, or is killed, is said to do so, with where it waited, never as a bare exit status.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrate.records import Finding

PASSED, FAILED, SKIPPED, EXPECTED = "passed", "failed", "skipped", "expected"
NOT_SHARDED_CODES = {"MIG101", "MIG111"}  # the conversion already said the data is not sharded
LEFT_ON_EVERY_RANK_CODES = {"MIG112"}  # the conversion said it left these prints on every rank
MAX_LISTED = 8

TITLES = {
    "steps": "every rank starts and reaches the steps",
    "hang": "no rank waits forever",
    "parameters": "parameters stay identical across ranks",
    "data": "ranks train on different samples",
    "rank_zero": "output and files on rank 0 only",
    "checkpoint": "checkpoints keep the original's layout",
    "compare": "trains like the original at nproc times the batch",
    "resume": "the second run (--then) resumes from what the first saved",
}
# --compare: float32 sums in another order differ by ~1e-7; these bounds leave ample margin
WEIGHT_ATOL, WEIGHT_RTOL, LOSS_RTOL = 1e-5, 1e-4, 1e-4


@dataclass
class RankRecord:
    """What one rank recorded (runner.py writes it)."""

    rank: int
    events: list[dict[str, Any]]
    stack: str
    by_kind: dict[str, list[dict[str, Any]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Events indexed once by kind: the checks ask for one kind per step (thousands with --to-end)."""
        self.by_kind = {}
        for event in self.events:
            self.by_kind.setdefault(event["kind"], []).append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self.by_kind.get(kind, [])

    @property
    def end(self) -> dict[str, Any] | None:
        ends = self.of("end")
        return ends[-1] if ends else None

    @property
    def root(self) -> str:
        starts = self.of("start")
        return str(starts[0].get("root", "")) if starts else ""

    @property
    def steps(self) -> int:
        return len(self.of("step"))


@dataclass(frozen=True)
class Launch:
    """One launch (the original as one process, or the converted script under its launcher)."""

    returncode: int
    output: str  # stdout and stderr together, the tail
    records: dict[int, RankRecord]
    timed_out: bool  # stopped by verify (see `stopped`), not ended by itself
    folder: str = ""  # where the ranks wrote their records
    stopped: str = ""  # "no progress" (a hang), "still working" (at --max-time), "" (see processes.py)
    idle: tuple[int, ...] = ()  # the ranks that had made no progress for the timeout when it was stopped
    seconds: float = 0.0  # how long it ran
    timeout: float = 0.0  # the --timeout it ran under


@dataclass
class Check:
    name: str
    status: str
    detail: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": TITLES.get(self.name, self.name), "status": self.status, "detail": self.detail}


@dataclass
class VerifyResult:
    script: str
    target: str
    status: str  # passed | failed | error
    message: str = ""
    checks: list[Check] = field(default_factory=list)
    findings: tuple[Finding, ...] = ()
    steps: int = 0
    nproc: int = 0
    notes: list[str] = field(default_factory=list)  # what verify left out of its copy, or noticed
    ran_to_end: bool | None = None  # --to-end: every rank of the converted script ran it to completion

    @classmethod
    def cannot_run(cls, script: str, target: str, message: str, findings: tuple[Finding, ...] = ()) -> VerifyResult:
        return cls(script=script, target=target, status="error", message=message, findings=findings)

    @property
    def exit_code(self) -> int:
        return {"passed": 0, "failed": 1}.get(self.status, 2)

    def as_dict(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "target": self.target,
            "status": self.status,
            "message": self.message,
            "steps": self.steps,
            "nproc": self.nproc,
            "checks": [c.as_dict() for c in self.checks],
            "notes": list(self.notes),
            "ran_to_end": self.ran_to_end,
            "findings": [{"code": f.code, "severity": f.severity.value, "line": f.line, "col": f.col, "message": f.message}
                         for f in self.findings],
        }


def read_records(folder: Path) -> dict[int, RankRecord]:
    records: dict[int, RankRecord] = {}
    for path in sorted(folder.glob("rank*.jsonl")):
        rank = int(path.stem.removeprefix("rank"))
        events = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # the rank was killed mid-line
        stack_path = path.with_suffix(".stack")
        stack = stack_path.read_text(errors="replace") if stack_path.exists() else ""
        records[rank] = RankRecord(rank=rank, events=events, stack=stack)
    return records


class Source:
    """Quotes lines of the converted script for the report."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.lines = text.splitlines()

    def text_at(self, where: str | None) -> str:
        """The stripped text of the script's line `where` names ("" for another file or no line)."""
        file, _, line = (where or "").rpartition(":")
        if file == self.name and line.isdigit() and 0 < int(line) <= len(self.lines):
            return self.lines[int(line) - 1].strip()
        return ""

    def at(self, where: str | None) -> str:
        if not where:
            return "(outside the script)"
        file, _, line = where.rpartition(":")
        if file == self.name and line.isdigit() and 0 < int(line) <= len(self.lines):
            return f"{where}: `{self.lines[int(line) - 1].strip()}`"
        return where


def check_all(script: str, target: str, steps: int, nproc: int, original: Launch, converted: Launch,
              findings: tuple[Finding, ...], converted_text: str, compare: bool = False,
              original_text: str = "") -> VerifyResult:
    name = Path(script).name
    result = VerifyResult(script=script, target=target, status="passed", findings=findings, steps=steps, nproc=nproc)
    expected, problem = expected_steps(original, steps, Source(name, original_text))
    if problem:
        result.status, result.message = "error", problem
        return result
    source = Source(name, converted_text)
    result.steps = expected
    result.checks = [
        check_steps(converted, nproc, expected, source),
        check_hang(converted, nproc, source),
        check_parameters(converted, nproc),
        check_data(converted, nproc, findings, source),
        check_rank_zero(converted, findings, source, Source(name, original_text)),
        check_checkpoints(original, converted, source),
    ]
    if compare:
        result.checks.append(check_compare(original, converted, nproc))
    failed = [c for c in result.checks if c.status == FAILED]
    result.status = "failed" if failed else "passed"
    result.message = (f"{len(failed)} of {len(result.checks)} checks failed" if failed
                      else f"{nproc} processes ran {expected} steps: every check passed or was not exercised")
    return result


def expected_steps(original: Launch, steps: int, source: Source | None = None) -> tuple[int, str]:
    """(the steps the converted run must reach, or a reason the comparison cannot run)."""
    record = original.records.get(0)
    end = record.end if record else None
    if record is not None and end is None and (record.stack or original.timed_out):
        return 0, original_hang(record, original, source or Source("", ""))
    if record is None or end is None:
        return 0, f"the original script did not run to its first steps ({ended(original)}); output:\n{tail(original.output)}"
    if end["outcome"] == "error":
        return 0, (f"the original script fails on its own, so the conversion cannot be judged: {end.get('error')}"
                   f" at {end.get('where') or '?'}")
    if record.steps == 0:
        return 0, ("the original script took no step: no optimizer stepped and no trainable parameter changed"
                   " between two forwards (is the training loop behind an option?)")
    return min(steps, record.steps), ""


def original_hang(record: RankRecord, launch: Launch, source: Source) -> str:
    """The original stopped without ending: it waited past the timeout, or was stopped; where."""
    where = waiting_at(record, source) or "a line outside the script (no frame of it on the stack)"
    if launch.stopped == "still working":
        return (f"the original script was still working after {launch.seconds:.0f} s (--max-time), so the"
                f" conversion cannot be judged: rank 0 was at {where} after {record.steps} steps; raise --max-time")
    if launch.stopped:
        how = f"made no progress (no step, no record, no CPU time) for {launch.timeout:g} s"
    else:
        how = "waited past the timeout" if record.stack.startswith("Timeout") else f"was stopped ({ended(launch)})"
    return f"the original script hung, so the conversion cannot be judged: rank 0 {how} after {record.steps} steps, at {where}"


def ended(launch: Launch) -> str:
    if launch.stopped == "no progress":
        return f"no progress for {launch.timeout:g} s"
    if launch.stopped:
        return f"still working after {launch.seconds:.0f} s, --max-time"
    if launch.timed_out:
        return "it timed out"
    if launch.returncode < 0:
        return f"killed by signal {-launch.returncode}"
    return f"exit {launch.returncode}"


def check_steps(launch: Launch, nproc: int, expected: int, source: Source) -> Check:
    check = Check("steps", PASSED)
    for rank in range(nproc):
        record = launch.records.get(rank)
        if record is None:
            check.status = FAILED
            check.detail.append(f"rank {rank} never started; launcher output:\n{tail(launch.output)}")
            continue
        end = record.end
        if end is not None and end["outcome"] == "error":
            check.status = FAILED
            check.detail.append(f"rank {rank} raised {end.get('error')} at {source.at(end.get('where'))}"
                                f" after {record.steps} steps")
        elif record.steps < expected and end is not None and end["outcome"] == "finished":
            check.detail.append(f"rank {rank} ran {record.steps} steps and the script ended by itself"
                                " (each rank has 1/N of the data)")
        elif record.steps < expected:
            check.status = FAILED
            stopped = waiting_at(record, source)
            how = f"; it was at {stopped} when it was stopped" if stopped else ""
            check.detail.append(f"rank {rank} reached {record.steps} of {expected} steps{how}")
    finished = [r for r in launch.records.values() if r.end is not None and r.end["outcome"] == "finished"]
    if not check.detail and len(finished) == nproc and any(e.get("to_end") for r in finished for e in r.of("start")):
        check.detail.append(f"{nproc} ranks ran the script to its end ({', '.join(str(r.steps) for r in finished)} steps)")
    elif not check.detail:
        check.detail.append(f"{nproc} ranks reached {expected} steps")
    return check


def check_hang(launch: Launch, nproc: int, source: Source) -> Check:
    """Failed when verify stopped the launch for making no progress; skipped (not a hang) when it
    was stopped at --max-time while a rank still worked. Each rank is named with where it was."""
    if launch.stopped:
        return stopped_launch(launch, nproc, source)
    check = Check("hang", PASSED)
    for rank in range(nproc):
        record = launch.records.get(rank)
        if record is not None and record.stack.startswith("Timeout"):
            check.detail.append(f"rank {rank} waited past the timeout at {waiting_at(record, source) or '?'}")
        elif record is not None and launch.timed_out and record.end is None:
            check.detail.append(f"rank {rank} was still running at the timeout, at {waiting_at(record, source) or '?'}")
    if launch.timed_out and not check.detail:
        check.detail.append("the launch did not end within the timeout")
    check.status = FAILED if check.detail else PASSED
    return check


def stopped_launch(launch: Launch, nproc: int, source: Source) -> Check:
    """The ranks of a launch verify stopped: which waited (no step, no record, no CPU time for the
    timeout) and which still worked, each with where it was."""
    hung = launch.stopped == "no progress"
    check = Check("hang", FAILED if hung else SKIPPED)
    for rank in range(nproc):
        record = launch.records.get(rank)
        if record is None or record.end is not None:
            continue
        where = waiting_at(record, source) or "a line outside the script (no frame of it on the stack)"
        if rank in launch.idle:
            check.detail.append(f"rank {rank} made no progress (no step, no record, no CPU time) for "
                                f"{launch.timeout:g} s after {record.steps} steps, at {where}")
        else:
            check.detail.append(f"rank {rank} was still working after {launch.seconds:.0f} s (--max-time), "
                                f"after {record.steps} steps, at {where}: slow, not hung")
    if not check.detail:
        check.detail.append(f"the launch made no progress for {launch.timeout:g} s before its ranks started" if hung
                            else f"the launch was still working after {launch.seconds:.0f} s (--max-time)")
    return check


def check_parameters(launch: Launch, nproc: int) -> Check:
    """The full parameters of each trained model (sharded ones gathered on every rank) are the same
    on every rank after each step both recorded."""
    present = [r for r in (launch.records.get(rank) for rank in range(nproc)) if r is not None and parameters_after(r)]
    if len(present) < 2:
        return Check("parameters", SKIPPED, ["fewer than two ranks recorded their parameters after a step"])
    per_rank = [parameters_after(r) for r in present]
    common = sorted(set.intersection(*(set(p) for p in per_rank)))
    for step in common:
        for model in per_rank[0][step]:
            values = [p[step].get(model) for p in per_rank]
            if len(set(values)) > 1:
                label = model.split(":", 1)[1]
                return Check("parameters", FAILED, [
                    f"after step {step} the parameters of {label} differ between ranks: its gradients are not"
                    " averaged across ranks (is it wrapped, and are the others' batches the same size?)"])
    sharded = " (sharded parameters gathered from every rank)" if any(
        e.get("sharded") for r in present for e in r.of("params")) else ""
    return Check("parameters", PASSED, [f"identical on {len(present)} ranks after each of {len(common)} steps{sharded}"])


def parameters_after(record: RankRecord) -> dict[int, dict[str, str]]:
    """{step: {model: digest of its full parameters}} as the rank recorded them."""
    found = {e["n"]: e["params"] for e in record.of("step") if e.get("params")}
    found.update({e["step"]: e["params"] for e in record.of("params") if e.get("params")})
    return found


def check_data(launch: Launch, nproc: int, findings: tuple[Finding, ...], source: Source) -> Check:
    records = [launch.records.get(rank) for rank in range(nproc)]
    present = [r for r in records if r is not None and r.of("input")]
    if len(present) < 2:
        return Check("data", SKIPPED, ["fewer than two ranks ran a forward"])
    steps = min(len(r.of("input")) for r in present)
    inputs = [list(step) for step in zip(*(r.of("input")[:steps] for r in present))]
    if all(event["digest"] is None for row in inputs for event in row):
        return Check("data", SKIPPED, ["the model's forward received no tensor"])
    if any(len({event["digest"] for event in row}) > 1 for row in inputs):
        return Check("data", PASSED, [f"inputs differ across ranks in the first forward of {steps} steps"])
    first = inputs[0][0]
    detail = [f"the first forward of each of {steps} steps ({first['model']} at {source.at(first.get('where'))})"
              " received identical inputs on every rank: each rank trains on the same samples"]
    reported = [f for f in findings if f.code in NOT_SHARDED_CODES]
    if reported:
        detail.append("expected: the conversion reported it (" + "; ".join(f"{f.code} line {f.line}" for f in reported) + ")")
        return Check("data", EXPECTED, detail)
    return Check("data", FAILED, detail)


WRITES = {"write": "wrote", "append": "appended to", "rename": "renamed a file to", "remove": "removed",
          "link": "linked"}  # "mkdir" and "create" (exclusive: a second rank would fail) are not listed


def check_rank_zero(launch: Launch, findings: tuple[Finding, ...], source: Source, original: Source) -> Check:
    """Ranks other than 0 print nothing and change no file (runner's writes.py sees every file
    opened for writing and everything that reaches stdout and stderr, with the user's line).
    Output from lines the conversion said it left on every rank (MIG112) is expected, not a failure."""
    seen: list[str] = []
    lines: set[str] = set()
    for rank, record in sorted(launch.records.items()):
        if rank != 0:
            for event in record.events:
                if line := rank_output(rank, event, record.root, source):
                    seen.append(line)
                    lines.add(source.text_at(event.get("where")))
    if not seen:
        return Check("rank_zero", PASSED, ["no other rank printed, logged or wrote a file"])
    more = [f"... and {len(seen) - MAX_LISTED} more"] if len(seen) > MAX_LISTED else []
    left = [f for f in findings if f.code in LEFT_ON_EVERY_RANK_CODES]
    if left and lines <= {original.text_at(f"{original.name}:{f.line}") for f in left}:
        said = "; ".join(f"{f.code} line {f.line}" for f in left)
        return Check("rank_zero", EXPECTED, seen[:MAX_LISTED] + more + [f"expected: the conversion reported it ({said})"])
    return Check("rank_zero", FAILED, seen[:MAX_LISTED] + more)


def rank_output(rank: int, event: dict[str, Any], root: str, source: Source) -> str:
    """What a rank printed or wrote, and where, or "" (output no line of the user's code made)."""
    kind, where = event["kind"], event.get("where")
    if kind in ("print", "log"):
        return f"rank {rank} printed {event['text']!r} at {source.at(where)}"
    if kind == "output" and where:
        return (f"rank {rank} printed {event['text']!r} (not through sys.{event.get('stream', 'stdout')}: a"
                f" subprocess or native code) at {source.at(where)}")
    if kind == "write" and event.get("op", "write") in WRITES:
        return f"rank {rank} {WRITES[event.get('op', 'write')]} {relative(event['path'], root)} at {source.at(where)}"
    if kind == "dropped":
        return f"rank {rank}: {event['count']} more lines and files not recorded"
    return ""


def check_checkpoints(original: Launch, converted: Launch, source: Source) -> Check:
    ours = converted.records.get(0)
    saves = ours.of("save") if ours else []
    if not saves:
        return Check("checkpoint", SKIPPED, ["rank 0 saved nothing in the steps run"])
    reference = original.records[0]
    by_path = {relative(e["path"], reference.root): e for e in reference.of("save")}
    model_layouts = [m["state_dict"] for m in reference.of("model")]
    check = Check("checkpoint", PASSED)
    for save in saves:
        path = relative(save["path"], ours.root if ours else "")
        where = source.at(save.get("where"))
        if save.get("module"):
            if save["module"].endswith("(wrapped)"):
                check.detail.append(f"{path} pickles the wrapper around {save['module'].split()[0]} at {where}")
            continue
        theirs = by_path.get(path)
        expected = [d["layout"] for d in theirs["state_dicts"]] if theirs else model_layouts
        for state in save["state_dicts"]:
            problem = layout_problem(state["layout"], expected)
            if problem:
                key = f"[{state['key']!r}]" if state["key"] else ""
                check.detail.append(f"{path}{key} saved at {where}: {problem}")
    if check.detail:
        check.status = FAILED
    else:
        check.detail.append(f"{len(saves)} checkpoint(s) written on rank 0 match the original's state-dict layout")
    return check


def layout_problem(layout: dict[str, Any], expected: list[dict[str, Any]]) -> str:
    if not expected or any(layout == e for e in expected):
        return ""
    stripped = {k.removeprefix("module."): v for k, v in layout.items()}
    if any(stripped == e for e in expected) and stripped != layout:
        return "its keys carry the wrapper's `module.` prefix; the original model cannot load it strictly"
    if any({k.removeprefix("module."): v for k, v in e.items()} == layout for e in expected):
        return ("the original's keys carry nn.DataParallel's `module.` prefix and these do not: the original"
                " script cannot load it as it is")
    if not any(set(layout) & set(e) for e in expected):
        return ""  # not a state dict of a trained model (optimizer, scaler...): nothing to compare
    closest = max(expected, key=lambda e: len(set(layout) & set(e)))
    missing, extra = sorted(set(closest) - set(layout)), sorted(set(layout) - set(closest))
    if missing or extra:
        return f"keys differ from the original's (missing {missing[:3]}, unexpected {extra[:3]})"
    changed = [k for k in layout if layout[k] != closest[k]]
    return f"shapes or dtypes differ from the original's at {changed[:3]}"


RUNNER = str(Path(__file__).with_name("runner.py"))
STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def last_user_frame(stack: str, source: Source, root: str = "") -> str | None:
    """The innermost frame of a dumped stack in the user's code: a file under `root` (the copy of
    the user's folder the rank ran in), or, without a root, the script itself. Named relative to
    the folder; the script's own lines are quoted."""
    for match in STACK_FRAME.finditer(stack):  # innermost first, thread by thread
        file = match["file"]
        if file == RUNNER:
            continue
        if root and relative(file, root) != file:
            name = relative(file, root)
        elif Path(file).name == source.name:
            name = source.name
        else:
            continue
        return f"{source.at(name + ':' + match['line'])} (in {match['function']})"
    return None


def waiting_at(record: RankRecord, source: Source) -> str | None:
    return last_user_frame(record.stack, source, record.root)


def relative(path: str, root: str) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def check_compare(original: Launch, converted: Launch, nproc: int) -> Check:
    """Weights after the last step and each step's loss (mean over ranks) against the original."""
    ours, theirs = Path(converted.folder) / "weights.pt", Path(original.folder) / "weights.pt"
    untrained = compare_trained(original, converted)
    if not ours.exists() or not theirs.exists():
        if untrained:
            return Check("compare", FAILED, untrained)
        return Check("compare", SKIPPED, ["a run did not reach its last step, so there are no weights to compare"])
    detail = [*compare_losses(original, converted, nproc)]
    import torch  # only here: the comparison needs the tensors themselves

    expected = torch.load(theirs, map_location="cpu", weights_only=True)
    actual = torch.load(ours, map_location="cpu", weights_only=True)
    if not expected or not actual:
        return Check("compare", FAILED if untrained else SKIPPED,
                     untrained or [f"the {'original' if not expected else 'converted run'}'s weights were not saved"])
    worst, failed = 0.0, list(untrained)
    for (model, state), other in zip(expected.items(), actual.values()):
        for key, tensor in state.items():
            if key not in other or other[key].shape != tensor.shape:
                failed.append(f"{model.split(':', 1)[1]}.{key} is missing or has another shape")
                continue
            if not tensor.is_floating_point():
                continue
            difference = (other[key].float() - tensor.float()).abs()
            worst = max(worst, float(difference.max()) if difference.numel() else 0.0)
            if bool((difference > WEIGHT_ATOL + WEIGHT_RTOL * tensor.float().abs()).any()):
                failed.append(f"{model.split(':', 1)[1]}.{key} differs by up to {float(difference.max()):.3g}")
    detail.append(f"weights after the last step: max |difference| {worst:.3g} (tolerance {WEIGHT_ATOL:g} + {WEIGHT_RTOL:g}*|w|)")
    loss_failed = any(line.startswith("loss differs") for line in detail)
    if failed or loss_failed:
        hint = ("(a distributed run differs when the script does not seed its model's initialisation, or uses "
                "BatchNorm statistics, dropout or other per-rank randomness: --compare proves equality only for "
                "seeded scripts without them)")
        return Check("compare", FAILED, failed[:MAX_LISTED] + detail + [hint])
    return Check("compare", PASSED, detail)


def compare_trained(original: Launch, converted: Launch) -> list[str]:
    """Each parameter that changes in the original's steps must change in the converted run's
    (rank 0, full parameters), and the other way round; a mismatch named by model and parameter."""
    theirs, ours = trained_parameters(original.records.get(0)), trained_parameters(converted.records.get(0))
    lines = []
    for index, (label, changed, frozen) in theirs.items():
        if index not in ours:
            continue
        _, changed_here, frozen_here = ours[index]
        lines += [f"{label}.{name} trains in the original and not in the converted run (unchanged after its steps)"
                  for name in sorted(changed & frozen_here)]
        lines += [f"{label}.{name} trains in the converted run and not in the original"
                  for name in sorted(frozen & changed_here)]
    return lines


def trained_parameters(record: RankRecord | None) -> dict[str, tuple[str, set[str], set[str]]]:
    """{model's place: (its class, parameters that changed since its first forward, those that did
    not)} after the last step the rank recorded its parameters."""
    events = record.of("params") if record is not None else []
    if not events:
        return {}
    found: dict[str, tuple[str, set[str], set[str]]] = {}
    for key, name in [pair for e in events for pair in e.get("trained", [])] + events[-1].get("frozen", []):
        index, _, label = key.partition(":")
        found.setdefault(index, (label, set(), set()))
    for e in events:
        for key, name in e.get("trained", []):
            found[key.partition(":")[0]][1].add(name)
    for key, name in events[-1].get("frozen", []):
        found[key.partition(":")[0]][2].add(name)
    return found


def compare_losses(original: Launch, converted: Launch, nproc: int) -> list[str]:
    reference = {e["step"]: e["value"] for e in original.records[0].of("loss")}
    per_rank = [{e["step"]: e["value"] for e in converted.records[r].of("loss")} for r in range(nproc) if r in converted.records]
    lines = []
    for step, value in sorted(reference.items()):
        values = [losses[step] for losses in per_rank if step in losses]
        if len(values) != nproc:
            continue
        mean = sum(values) / nproc
        if abs(mean - value) > LOSS_RTOL * max(abs(value), 1e-8):
            lines.append(f"loss differs at step {step}: {mean:.6g} (mean of ranks) vs {value:.6g}")
        else:
            lines.append(f"step {step}: loss {mean:.6g} vs {value:.6g}")
    return lines
