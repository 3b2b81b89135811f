"""Reading a folder runs nothing of the folder's: a repository's own `.git/config` (an unpacked
archive's) can name programs git would start (core.fsmonitor on every index read, hooks, aliases,
a pager), and the environment can point git at another repository. `migrate to-ddp --check DIR`
and `migrate.paths.select` still find the tracked and untracked-not-ignored scripts, and never
start the program (a marker file it would touch never appears)."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from migrate.paths import select

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"
FOUND = ["tracked.py", "untracked.py"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True, env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})


def repository(folder: Path) -> Path:
    """tracked.py, untracked.py, and scratch/ignored.py that .gitignore leaves out."""
    folder.mkdir()
    git("init", "-q", cwd=folder)
    (folder / ".gitignore").write_text("scratch/\n")
    for name in ("tracked.py", "untracked.py", "scratch/ignored.py"):
        (folder / name).parent.mkdir(exist_ok=True)
        shutil.copy(SCRIPT, folder / name)
    git("add", ".gitignore", "tracked.py", cwd=folder)
    git("commit", "-q", "-m", "first", cwd=folder)
    return folder


def touches(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def fsmonitor(repo: Path, marker: Path) -> None:
    git("config", "core.fsmonitor", f"{touches(marker)}; false", cwd=repo)


def included_fsmonitor(repo: Path, marker: Path) -> None:
    """Set in a file of the archive that .git/config includes: the command line still wins."""
    (repo / "settings.gitconfig").write_text(f"[core]\n\tfsmonitor = \"{touches(marker)}; false\"\n")
    git("config", "include.path", "../settings.gitconfig", cwd=repo)


def hooks(repo: Path, marker: Path) -> None:
    """Every hook, in the repository's hooks folder and in one core.hooksPath names, with an
    untracked cache that would tempt git into writing the index."""
    elsewhere = repo / "tools"
    elsewhere.mkdir()
    for folder in (repo / ".git" / "hooks", elsewhere):
        for name in ("post-index-change", "post-checkout", "pre-commit", "reference-transaction", "fsmonitor-watchman"):
            hook = folder / name
            hook.write_text(f"#!/bin/sh\n{touches(marker)}\n")
            hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    git("config", "core.hooksPath", str(elsewhere), cwd=repo)
    git("config", "core.untrackedCache", "true", cwd=repo)


def aliases_and_pager(repo: Path, marker: Path) -> None:
    for command in ("ls-files", "rev-parse", "check-ignore"):
        git("config", f"alias.{command}", f"!{touches(marker)}", cwd=repo)
        git("config", f"pager.{command}", "true", cwd=repo)
    git("config", "core.pager", f"{touches(marker)}; cat", cwd=repo)


HOSTILE_CONFIG: dict[str, Callable[[Path, Path], None]] = {
    "fsmonitor": fsmonitor, "included fsmonitor": included_fsmonitor, "hooks": hooks,
    "aliases and pager": aliases_and_pager,
}


@pytest.mark.parametrize("name", HOSTILE_CONFIG)
def test_a_hostile_repository_config_runs_nothing(name: str, tmp_path: Path) -> None:
    repo = repository(tmp_path / "archive")
    marker = tmp_path / "ran"
    HOSTILE_CONFIG[name](repo, marker)
    selection = select([str(repo)])
    assert not marker.exists(), "select() ran a program the repository's config names"
    assert sorted(os.path.relpath(found.path, repo) for found in selection.files) == FOUND
    result = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "--check", "."], cwd=repo,
                            capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "migrate to-ddp --check ran a program the repository's config names"
    assert result.returncode == 1, result.stderr
    assert sorted(result.stdout.split()) == FOUND


def test_git_variables_of_the_environment_do_not_redirect_the_search(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """GIT_DIR / GIT_WORK_TREE (a shell inside another repository's hook, say) name another
    repository: the folder's own is still the one asked, so its ignored file stays out."""
    repo = repository(tmp_path / "archive")
    other = repository(tmp_path / "other")
    marker = tmp_path / "ran"
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{touches(marker)}; false'")
    selection = select([str(repo)])
    assert sorted(os.path.relpath(found.path, repo) for found in selection.files) == FOUND
    assert not marker.exists()
