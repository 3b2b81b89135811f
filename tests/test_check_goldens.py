"""`migrate check` over the tool's own golden outputs (tests/cases/<case>/<target>.py for ddp, fsdp,
deepspeed and horovod): what it finds must be exactly the allow-list below, each entry saying why
it is right to flag. A new finding on a golden output is either a rule too broad for that shape
(narrow the rule) or a defect of the conversion (list it here, and fix the converter)."""

from __future__ import annotations

from pathlib import Path

from migrate.check import check_source

CASES = Path(__file__).resolve().parent / "cases"
TARGETS = ("ddp", "fsdp", "deepspeed", "horovod")
GOLDENS = sorted(p for target in TARGETS for p in CASES.glob(f"*/{target}.py"))

STREAM = "right: every rank trains on the whole stream; the conversion reports MIG111 (an iterable dataset takes no sampler) and cannot split it"
ALLOWED = {
    # DC201: a training DataLoader over an iterable dataset whose class never reads the rank
    ("config_unbatched_loader/deepspeed.py", "DC201", 31): STREAM,
    ("iterable_dataset/ddp.py", "DC201", 35): STREAM,
    ("iterable_dataset/fsdp.py", "DC201", 36): STREAM,
    ("iterable_dataset/deepspeed.py", "DC201", 36): STREAM,
    ("iterable_dataset/horovod.py", "DC201", 30): STREAM,
    ("streaming_dataset/ddp.py", "DC201", 26): STREAM,
    ("streaming_dataset/ddp.py", "DC201", 52): STREAM,
    ("streaming_dataset/fsdp.py", "DC201", 27): STREAM,
    ("streaming_dataset/fsdp.py", "DC201", 53): STREAM,
    ("streaming_dataset/horovod.py", "DC201", 24): STREAM,
    ("streaming_dataset/horovod.py", "DC201", 48): STREAM,
    # DC402: `with open("predictions.txt", "w")` around the model's forward: every rank writes the
    # file; the conversion cannot guard it (the DDP forward inside would hang) and says so (MIG120)
    ("log_files/ddp.py", "DC402", 49): "right: every rank writes predictions.txt; reported as MIG120",
    ("log_files/fsdp.py", "DC402", 52): "right: every rank writes predictions.txt; reported as MIG120",
    ("log_files/deepspeed.py", "DC402", 57): "right: every rank writes predictions.txt; reported as MIG120",
    # DC301: the Adam inside the script's own WarmupOptimizer(...) takes its default lr, and the
    # wrapper class sets the rate itself; steps/scale_lr.py writes torch's default times hvd.size()
    # only for `optimizer = Adam(...)` on its own line, so here it says "by hand" (MIG004)
    ("optimizer_wrapper_class/horovod.py", "DC301", 39): "right: a default lr inside a wrapper class, left to the user (MIG004)",
}


def found() -> set[tuple[str, str, int]]:
    return {(f"{p.parent.name}/{p.name}", v.code, v.line) for p in GOLDENS for v in check_source(p.read_text(), str(p))}


def test_golden_outputs_check_clean_but_for_the_allow_list():
    assert len(GOLDENS) > 100
    assert found() == set(ALLOWED)

