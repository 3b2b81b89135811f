"""Run one step (or a few, in target order) on a short script: the rewritten text and the findings.

`run_steps` is the only place these tests build a Context; adapt it there when Context changes.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from migrate.analysis import analyze
from migrate.api import _imports_stdlib
from migrate.records import Finding
from migrate.options import check as check_options
from migrate.rewrite import EditPlan
from migrate.steps.base import Context, Step
from migrate.targets import targets


def run_steps(steps: Sequence[Step], code: str, target: str = "ddp", **option_overrides: object) -> StepResult:
    """Analyse `code` (dedented), run `steps` in order (stopping at a refusal, as the API does),
    apply the plan. The result must compile: a rewrite that does not is a failure."""
    code = textwrap.dedent(code)
    options = targets()[target].options_class(**option_overrides)
    check_options(targets()[target], options)
    conversion = targets()[target].conversion()
    module = cst.parse_module(code)
    sites = analyze(module)
    ctx = Context(sites=sites, plan=EditPlan(module=module), options=options, runtime=conversion.runtime,
                  wrapper=conversion.wrapper, source=code, script="train.py")
    for step in steps:
        step(ctx)
        if ctx.refused:
            break
    text = ctx.plan.apply(sites.index.import_stmts, _imports_stdlib).code
    compile(text, "train.py", "exec")
    findings = tuple(sorted(ctx.findings, key=lambda f: (f.line, f.col, f.code)))
    return StepResult(source=code, text=text, findings=findings, refused=ctx.refused)


def run_step(step: Step, code: str, target: str = "ddp", **option_overrides: object) -> StepResult:
    return run_steps([step], code, target, **option_overrides)


@dataclass(frozen=True)
class StepResult:
    source: str  # the script as given (dedented)
    text: str  # the script after the steps' edits
    findings: tuple[Finding, ...]  # sorted by line, column, code
    refused: bool  # a step said the file must be left as it is

    @property
    def codes(self) -> list[tuple[str, int]]:
        """(code, line) of each finding."""
        return [(f.code, f.line) for f in self.findings]

    @property
    def added(self) -> list[str]:
        """The lines the steps added (or changed into), in order; top-level imports apart."""
        return [line for line in self._diff("+ ") if not _is_import(line)]

    @property
    def removed(self) -> list[str]:
        """The lines of the script the steps removed (or changed), in order."""
        return self._diff("- ")

    @property
    def imports(self) -> list[str]:
        """The top-level import lines the steps added."""
        return [line for line in self._diff("+ ") if _is_import(line)]

    def _diff(self, sign: str) -> list[str]:
        diff = difflib.ndiff(self.source.splitlines(), self.text.splitlines())
        return [line[2:] for line in diff if line.startswith(sign)]


def _is_import(line: str) -> bool:
    return line.startswith(("import ", "from "))
