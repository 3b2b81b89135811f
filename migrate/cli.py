"""The `migrate` command line: one command per target, sharing one contract.

By default a command prints a unified diff (the converted scripts plus the files it would
create) and writes nothing; `--write` applies it; `--check` only says which files would change.
Findings go to stderr as `path:line:col: MIGnnn message`. Exit status: 0 done, 1 `--check`
found files to convert, 2 bad input (missing, undecodable, syntax error) or an internal error.
This module imports no libcst: the API does, when a command actually runs.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from migrate.model import FileResult, InputError, Options

EXIT_OK, EXIT_WOULD_CHANGE, EXIT_BAD_INPUT = 0, 1, 2

app = typer.Typer(
    help=(
        "Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review.\n\n"
        "Example: migrate to-ddp train.py | less   (review)   then   migrate to-ddp --write train.py"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Paths = Annotated[list[str], typer.Argument(help="Training scripts, or folders searched for *.py.", show_default=False)]
Write = Annotated[bool, typer.Option("--write", help="Rewrite the files in place and create the launch script (atomically).")]
Check = Annotated[bool, typer.Option("--check", help="Write nothing; list the files that would change; exit 1 if any.")]
Nproc = Annotated[str, typer.Option("--nproc-per-node", metavar="N", help="Processes per node in the launch script: a number, 'gpu' or 'auto'. Example: --nproc-per-node 8")]
KeepGlobalBatch = Annotated[bool, typer.Option("--keep-global-batch", help="Divide each DataLoader's batch_size by the world size, so the global batch stays what the script says (default: each process keeps the script's batch, the global batch grows).")]
ScaleLr = Annotated[bool, typer.Option("--scale-lr", help="Multiply the optimizer's lr by the world size (linear scaling for the larger global batch).")]
SyncBatchnorm = Annotated[bool, typer.Option("--sync-batchnorm", help="Convert BatchNorm layers to SyncBatchNorm before wrapping (applied only when CUDA is available: it cannot run on CPU).")]
ReportFormat = Annotated[str, typer.Option("--report", metavar="FORMAT", help="How findings are printed on stderr: text, markdown or json.")]


@app.callback()
def _commands() -> None:
    """Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review."""


def _nproc(value: str) -> str:
    if value in ("auto", "gpu") or (value.isdigit() and int(value) > 0):
        return value
    raise typer.BadParameter(f"{value!r}: give a positive number, 'gpu' or 'auto'", param_hint="--nproc-per-node")


@app.command("to-ddp")
def to_ddp(
    paths: Paths,
    write: Write = False,
    check: Check = False,
    nproc_per_node: Nproc = "auto",
    keep_global_batch: KeepGlobalBatch = False,
    scale_lr: ScaleLr = False,
    sync_batchnorm: SyncBatchnorm = False,
    report: ReportFormat = "text",
) -> None:
    """DistributedDataParallel, launched by torchrun.

    Adds process-group setup (NCCL on GPUs, gloo on CPU; plain `python train.py` still runs as one
    process), a DistributedSampler with set_epoch, the model on the local rank's device wrapped in
    DDP, output and checkpoints on rank 0, no_sync() for gradient accumulation, and a launch script
    run_<script>_ddp.sh.

    Example: migrate to-ddp train.py > ddp.patch && git apply ddp.patch
    """
    options = Options(
        nproc_per_node=_nproc(nproc_per_node),
        keep_global_batch=keep_global_batch,
        scale_lr=scale_lr,
        sync_batchnorm=sync_batchnorm,
    )
    raise typer.Exit(run("ddp", paths, options, write=write, check=check, report=report))


def run(target: str, paths: list[str], options: Options, write: bool, check: bool, report: str) -> int:
    """Convert, then print or write. Returns the exit status."""
    from migrate import api
    from migrate import report as reports

    if report not in ("text", "markdown", "json"):
        _error(f"--report: unknown format {report!r} (text, markdown, json)")
        return EXIT_BAD_INPUT
    status = EXIT_OK
    results: list[FileResult] = []
    for outcome in api.migrate_paths(paths, target, options):
        if isinstance(outcome, InputError):
            _error(str(outcome))
            status = EXIT_BAD_INPUT
            continue
        results.append(outcome)
        if outcome.error:
            status = EXIT_BAD_INPUT
    _print_findings(results, report)
    changed = [r for r in results if r.changed and not r.error]
    if check:
        for result in changed:
            print(reports.display_path(result.path))
        return status or (EXIT_WOULD_CHANGE if changed else EXIT_OK)
    if write:
        return status or _write_all(changed)
    sys.stdout.write("".join(reports.result_diff(r) for r in changed))
    return status


def _write_all(results: list[FileResult]) -> int:
    from migrate import api
    from migrate.report import display_path

    try:
        for result in results:
            api.check_writable(result)
    except InputError as error:
        _error(str(error))
        return EXIT_BAD_INPUT
    for result in results:
        try:
            api.write_result(result)
        except InputError as error:
            _error(str(error))
            return EXIT_BAD_INPUT
        created = ", ".join(display_path(a.path) for a in result.artifacts)
        print(f"converted {display_path(result.path)}" + (f"; wrote {created}" if created else ""))
    return EXIT_OK


def _print_findings(results: list[FileResult], report: str) -> None:
    from migrate import report as reports

    if report == "json":
        sys.stderr.write(reports.findings_json(results) + "\n")
    elif report == "markdown":
        sys.stderr.write(reports.findings_markdown(results))
    else:
        for result in results:
            for line in reports.findings_text(result):
                sys.stderr.write(line + "\n")


def _error(message: str) -> None:
    sys.stderr.write(f"migrate: {message}\n")


def main() -> None:
    app()
