"""Whether a repository's git configuration makes read-only git commands run programs.

`git status`, `diff`, `log`, `show` and `blame` only read, until the configuration names a
program for them to run: `core.fsmonitor`, `diff.external`, a diff driver's `textconv` or
`command`, a filter's `clean`, `smudge` or `process`, a pager, a signature program, an ssh
command, a hooks directory, or a submodule (git recurses into it, under its own config).
A prompt injection that wrote one of these once would make every remembered `git status`
run its program. So a read-only git scope holds only where `configured_programs` finds
none, asked afresh for every command: the configuration can change between two commands.

Only the repository's own settings count (`local` and `worktree` scope, what their
`include`s bring in too): the user's global and system files are theirs, and writing them
is outside the project, so it asks. We ask git itself (`git config --list --show-scope`),
so that `include`s and `includeIf`s count as git counts them, with the environment a child
of ours gets (less our secrets), `core.fsmonitor` off for this run, stdin from /dev/null and
a short timeout. A
`post-index-change` hook counts too: `git status` writes the index and so runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ..child_env import child_environment

TIMEOUT_SECONDS = 3.0
USERS_OWN_SCOPES = frozenset({"system", "global", "command"})
"""Where a setting is the user's own choice (their `~/.gitconfig`, the machine's, their
environment), not the repository's: a `delta` pager set there does not cost the scope."""

_PROGRAM_KEYS = re.compile(
    r"core\.(fsmonitor|pager|sshcommand|hookspath)"
    r"|diff\.external"
    r"|diff\..+\.(textconv|command)"
    r"|filter\..+\.(clean|smudge|process)"
    r"|pager\..+"
    r"|gpg\.program|gpg\..+\.program"
    r"|submodule\..+"
)
"""Keys (as `git config --list` spells them: section and name in lower case) whose value
names a program that a read-only git command may run."""

_OFF = frozenset({"false", "no", "off", "0"})
_NO_PAGER = _OFF | {"", "cat", "true", "yes", "on", "1"}
"""`pager.<cmd>` as a boolean only picks the pager; `core.pager` empty or `cat` pages not."""


def configured_programs(cwd: Path) -> bool:
    """Whether git, run in `cwd`, is configured to run programs a read-only command would
    start; True too when git cannot tell us (not installed, a timeout, a broken config)."""
    listing = _git(cwd, "config", "--list", "--null", "--show-scope")
    if listing is None or listing.returncode != 0:
        return True
    fields = listing.stdout.decode("utf-8", "surrogateescape").split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        if scope not in USERS_OWN_SCOPES and _runs_a_program(key, value):
            return True
    hook = _git(cwd, "rev-parse", "--git-path", "hooks/post-index-change")
    if hook is None:
        return True
    if hook.returncode != 0:
        return False  # not in a repository: no index, no hook
    return os.path.lexists(cwd / os.fsdecode(hook.stdout.strip()))


def _runs_a_program(key: str, value: str) -> bool:
    if not _PROGRAM_KEYS.fullmatch(key):
        return False
    if key == "core.fsmonitor":
        return value.lower() not in _OFF
    if key == "core.pager":
        return value.strip() not in ("", "cat")
    if key.startswith("pager."):
        return value.strip().lower() not in _NO_PAGER
    return True


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """How git ran, or None when it could not run or took too long."""
    env = child_environment(os.environ)
    env.pop("GIT_CONFIG_NOSYSTEM", None)  # the system file counts for the user's git too
    try:
        return subprocess.run(
            ["git", "-c", "core.fsmonitor=false", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


__all__ = ["configured_programs"]
