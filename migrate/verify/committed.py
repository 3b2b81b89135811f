"""The original of a script already converted in place (`migrate to-ddp --write train.py`, then
`migrate verify train.py`): its committed version in git.

When converting SCRIPT says it already uses the target (MIG001), verify takes the working-tree
file as the converted script and `git show HEAD:<SCRIPT>` as the original, when SCRIPT is in a git
work tree and its committed version is not converted yet. git runs with its configuration
neutralised (no hook, fsmonitor or pager can run; see migrate/paths.py). When that is not possible,
`Unavailable` says why, with the exact `--converted` command to run instead.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from migrate.records import FileResult
from migrate.paths import NEUTRAL_CONFIG, git_environment

GIT_TIMEOUT = 60.0


class Unavailable(Exception):
    """No committed original: the message says why and what to run."""


def already_converted(conversion: FileResult) -> bool:
    return conversion.new == conversion.old and any(f.code == "MIG001" for f in conversion.findings)


def committed_text(script: str) -> str:
    """The committed (HEAD) text of `script`; Unavailable when there is none."""
    folder = os.path.dirname(os.path.abspath(script)) or os.curdir
    try:
        shown = git(folder, "show", f"HEAD:./{os.path.basename(script)}")
    except (OSError, subprocess.SubprocessError) as error:
        raise Unavailable(f"git could not be run ({error})") from None
    if shown.returncode != 0:
        reason = os.fsdecode(shown.stderr).strip().splitlines()
        raise Unavailable(f"git has no committed version of it ({reason[-1] if reason else 'not a git work tree'})")
    try:
        return shown.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise Unavailable("its committed version is not UTF-8 text") from None


def git(folder: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    settings = [word for setting in NEUTRAL_CONFIG for word in ("-c", setting)]
    return subprocess.run(["git", "--no-pager", *settings, "-C", folder, *args], capture_output=True,
                          stdin=subprocess.DEVNULL, env=git_environment(), timeout=GIT_TIMEOUT)


def suggestion(script: str, target: str, why: str) -> str:
    """What to run instead: the original and this converted file, named."""
    original = os.path.join(os.path.dirname(script), "ORIGINAL.py")
    command = shlex.join(["migrate", "verify", "--target", target, "--converted", script, original])
    return (f"{script} already uses the target (MIG001), so verify needs its original; {why}. Name the single-GPU"
            f" original and this converted file: {command}")
