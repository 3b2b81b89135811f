"""`migrate verify --then ARGS`: each script runs a second time, in the folder its first run left,
with its arguments plus ARGS (say `--resume`); the `resume` check judges the converted second run.

- Every check of checks.check_all applies to the two second runs (the original's is the
  reference, as for the first runs); each failure is quoted in the `resume` check with its line.
- Loaded what the first run saved: on every rank, the trained model's parameters at its first
  forward of the second run equal those its first run ended with (after its last recorded step).
  This is asked of the converted script only where the original's second run does it too (a script
  that saves at the end of an epoch the first run did not reach resumes from nothing, both ways).
  The runner records those parameters in its `model` event (`params`, the combined digest of the
  full parameters); where it does not, the check says it cannot tell, and does not fail.
"""

from __future__ import annotations

from migrate.records import Finding
from migrate.verify.checks import FAILED, PASSED, SKIPPED, Check, Launch, VerifyResult, check_all, ended


def check_resume(result: VerifyResult, firsts: tuple[Launch, Launch], agains: tuple[Launch, Launch], then: tuple[str, ...],
                 findings: tuple[Finding, ...], converted_text: str, original_text: str, compare: bool) -> Check:
    """The `resume` check: (original, converted) first runs and second runs."""
    shown = " ".join(then)
    again = check_all(result.script, result.target, result.steps or 1, result.nproc, agains[0], agains[1], findings,
                      converted_text, compare=compare, original_text=original_text)
    if again.status == "error":
        return Check("resume", SKIPPED, [f"the original's second run (--then {shown}) cannot be judged: {again.message}"])
    detail = [f"{c.name}: {line}" for c in again.checks if c.status == FAILED for line in c.detail]
    loaded, failed = loaded_detail(firsts, agains, result.nproc)
    detail += loaded
    status = FAILED if failed or any(c.status == FAILED for c in again.checks) else PASSED
    if status == PASSED:
        detail.insert(0, f"the second run (--then {shown}) started and reached {again.steps} steps on every rank")
    return Check("resume", status, detail)


def loaded_detail(firsts: tuple[Launch, Launch], agains: tuple[Launch, Launch], nproc: int) -> tuple[list[str], bool]:
    """(what each rank of the converted second run started from, whether that fails the check)."""
    reference = started_from_last(firsts[0], agains[0], 0)
    if reference is None:
        return ["cannot tell whether the second runs loaded what the first saved: the runner recorded no"
                " parameters at the first forward"], False
    if not reference:
        return ["the original's second run does not start from the weights its first run ended with (did the first"
                f" run save them? it {ended(firsts[0]) if firsts[0].timed_out else 'stopped'} after"
                f" {steps_of(firsts[0], 0)} steps): nothing to compare"], False
    missing = [rank for rank in range(nproc) if not started_from_last(firsts[1], agains[1], rank)]
    if not missing:
        return ["every rank started from the weights the first run ended with, as the original does"], False
    return [f"rank {rank} did not start from the weights the first run ended with (after step"
            f" {steps_of(firsts[1], rank)}); the original's second run does: it did not load what was saved"
            for rank in missing], True


def started_from_last(first: Launch, again: Launch, rank: int) -> bool | None:
    """Whether `rank` of the second run met its trained models at their first forward with the
    parameters its first run had after its last step; None when that was not recorded."""
    before, after = first.records.get(rank), again.records.get(rank)
    if before is None or after is None:
        return False
    last = [e["params"] for e in before.of("params") if e.get("params")]
    starts = {f"{e.get('index')}:{e.get('name')}": e.get("params") for e in after.of("model")}
    if not last or not starts:
        return False
    if all(value is None for value in starts.values()):
        return None
    return all(starts.get(key) == digest for key, digest in last[-1].items())


def steps_of(launch: Launch, rank: int) -> int:
    record = launch.records.get(rank)
    return record.steps if record is not None else 0


def with_resume(result: VerifyResult, check: Check) -> VerifyResult:
    """`result` with the resume check added, its status and message again."""
    result.checks.append(check)
    failed = [c for c in result.checks if c.status == FAILED]
    if result.status != "error":
        result.status = "failed" if failed else "passed"
        if failed:
            result.message = f"{len(failed)} of {len(result.checks)} checks failed"
    return result
