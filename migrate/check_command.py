"""`migrate check PATH...`: lint scripts that are already distributed (DDP, FSDP, DeepSpeed,
Horovod, DataParallel) for the guide's pitfalls, ruff-style. The rules are migrate.check's; this
module is the command line: the files are chosen as the to-* commands choose them, a line per
finding goes to stdout (`path:line:col: CODE message`; one JSON list with --report json; one SARIF
2.1.0 log with --report sarif, for code scanning), the
errors and a closing count line to stderr. `--fix` first repairs what migrate.check.fix can
(DC202, DC203, DC801), writes the files all or nothing (migrate.writing), says each repair on
stderr (`path:line:col: fixed CODE what`), then checks the fixed files. Exit 0 clean, 1 findings,
2 bad input (a file that cannot be read or parsed, an unknown code in --select/--ignore, an
unknown --report), which wins.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
RENDERERS = ("text", "json", "sarif")  # the --report formats

Paths = Annotated[Optional[list[str]], typer.Argument(metavar="PATH...", show_default=False, help="Scripts, or folders to search for *.py files (as the to-* commands search them).")]
Select = Annotated[Optional[str], typer.Option("--select", metavar="CODES", help="Only these rules, comma-separated; a prefix names a family (DC1, DC30). Default: every rule.")]
Ignore = Annotated[Optional[str], typer.Option("--ignore", metavar="CODES", help="Leave out these rules, comma-separated; prefixes allowed. Example: --ignore DC401,DC8")]
Report = Annotated[str, typer.Option("--report", metavar="text|json|sarif", help="text: `path:line:col: CODE message` lines; json: one list of {path, line, col, code, severity, message}; sarif: a SARIF 2.1.0 log, for code scanning. On stdout; errors and the count on stderr.")]
Exclude = Annotated[Optional[list[str]], typer.Option("--exclude", metavar="GLOB", help="Skip files a folder search finds whose path (relative to the folder) or any folder on the way matches GLOB; repeatable.")]
Fix = Annotated[bool, typer.Option("--fix", help="Repair what a small edit can (DC202: drop shuffle=True beside a sampler; DC203: add loader.sampler.set_epoch(epoch) at the top of the epoch loop; DC801: add dist.destroy_process_group() at the end of the entry point), writing the files all or nothing as --write does, print each repair, then check again.")]
ListRules = Annotated[bool, typer.Option("--list-rules", help="Print every rule (code, severity, what it finds) and exit.")]


def check(paths: Paths = None, select: Select = None, ignore: Ignore = None, report: Report = "text",
          exclude: Exclude = None, fix: Fix = False, list_rules: ListRules = False) -> None:
    """Lint scripts that are already distributed for the pitfalls that break training or hang it.

    It converts nothing and writes nothing unless --fix is given. It finds nn.DataParallel; a training DataLoader without
    a DistributedSampler, shuffle=True beside one, set_epoch never called; Horovod's LR not scaled,
    weights or optimizer state not broadcast, the optimizer not wrapped; prints, logs and checkpoint
    writes on every rank; collectives (barrier, all_reduce, a wrapped model's forward, state-dict
    gathers, save_checkpoint) that only rank 0 reaches; an optimizer built before fully_shard; a
    `module.` prefix saved into checkpoints; DeepSpeed batch sizes that cannot add up;
    destroy_process_group missing; NCCL asked to move CPU tensors. `--fix` repairs DC202, DC203 and
    DC801 in place (all files or none). `--list-rules` lists the codes. A line ending in `# noqa` (or
    `# noqa: DC401`) is left out. Exit 0 clean, 1 findings, 2 bad input.

    \b
    Example:
      migrate check train.py
      migrate check --select DC2,DC5 --report json scripts/
      migrate check --report sarif scripts/ > check.sarif
      migrate check --fix train.py
    """
    from migrate.check.rules import chosen, rule_table, unknown_codes
    from migrate.check.runner import check_paths, render_json, render_sarif, render_text

    if list_rules:
        sys.stdout.write(rule_table())
        raise typer.Exit(EXIT_OK)
    if report not in RENDERERS:
        raise typer.BadParameter(f"{report!r}: choose text, json or sarif", param_hint="--report")
    picked, dropped = _codes(select), _codes(ignore)
    for option, codes in (("--select", picked), ("--ignore", dropped)):
        unknown = unknown_codes(codes)
        if unknown:
            raise typer.BadParameter(f"{', '.join(unknown)} matches no rule (migrate check --list-rules)", param_hint=option)
    if not paths:
        raise typer.BadParameter("give at least one script or folder", param_hint="PATH...")
    rules = chosen(picked, dropped)
    if fix:
        _fix(paths, tuple(r.code for r in rules), tuple(exclude or ()))
    outcome = check_paths(paths, rules, tuple(exclude or ()))
    out, err = {"text": render_text, "json": render_json, "sarif": render_sarif}[report](outcome)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    status = EXIT_BAD_INPUT if outcome.errors else EXIT_FINDINGS if outcome.violations else EXIT_OK
    raise typer.Exit(status)


def _fix(paths: list[str], codes: tuple[str, ...], exclude: tuple[str, ...]) -> None:
    """--fix: repair and write (all or nothing), a line per repair on stderr; exit 2 when a file
    cannot be read or parsed, or writing fails (then nothing is written)."""
    from migrate.check.runner import fix_paths
    from migrate.records import InputError

    try:
        lines, errors = fix_paths(paths, codes, exclude)
    except InputError as error:
        sys.stderr.write(f"{error}\n--fix wrote nothing\n")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if errors:
        sys.stderr.write("".join(f"{e}\n" for e in errors) + "--fix wrote nothing\n")
        raise typer.Exit(EXIT_BAD_INPUT)
    sys.stderr.write("".join(lines))


def _codes(text: str | None) -> list[str]:
    return [code.strip().upper() for code in (text or "").split(",") if code.strip()]
