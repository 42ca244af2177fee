"""The files of a directory tree as a developer sees them: `.gitignore` honoured.

Blocking code: run it in a worker thread. Inside a git work tree git itself lists the files
(`git ls-files --cached --others --exclude-standard`), which knows every ignore rule; else a
walk applies a small `.gitignore` matcher (comments, `!` negation, trailing `/` for
directories, leading or inner `/` anchoring, `*`, `?`, `[...]`, `**`). `.git`,
`node_modules` and `.venv` are always skipped.

git runs hardened (`GIT_HARDENING`): the repository's config is the project's, and some of
it names programs git would run for us (`core.fsmonitor` runs on every index read), so
those are switched off; git gets the clean child environment and stdin from /dev/null.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..child_env import child_environment

ALWAYS_SKIPPED = frozenset({".git", "node_modules", ".venv"})
GIT_TIMEOUT_SECONDS = 30.0
GIT_HARDENING = ("-c", "core.fsmonitor=false", "-c", "diff.external=", "-c", "core.pager=cat")
"""Options before every git subcommand the agent runs itself: no program from the
repository's config. A subcommand that diffs also gets `--no-ext-diff --no-textconv`."""


def list_files(root: Path, check: Callable[[], None] = lambda: None) -> Iterator[Path]:
    """Absolute paths of the regular files under `root`, ignored ones left out.

    A symlink whose target lies outside `root` is left out too: reading through it would
    escape the roots without the permission a direct path outside them needs.
    `check` is called now and then; it may raise to stop the listing (cancellation).
    """
    real_root = root.resolve()
    listed = _git_files(root)
    if listed is None:
        candidates: Iterator[Path] = _walk(root, check)
    else:
        candidates = _from_index(root, listed, check)
    for path in candidates:
        if not path.is_symlink() or path.resolve().is_relative_to(real_root):
            yield path


def _from_index(root: Path, listed: list[str], check: Callable[[], None]) -> Iterator[Path]:
    for count, relative in enumerate(listed):
        if count % 1000 == 0:
            check()
        if ALWAYS_SKIPPED.isdisjoint(relative.split("/")):
            path = root / relative
            if path.is_file():  # the index also lists deleted files and submodules
                yield path


def _git_files(root: Path) -> list[str] | None:
    """Paths relative to `root` from git, or None when `root` is not in a work tree."""
    command = ["git", *GIT_HARDENING, "-C", str(root), "ls-files", "-z", "--cached", "--others"]
    try:
        done = subprocess.run(
            [*command, "--exclude-standard"],
            # Listing only reads: no index refresh written back under a lock.
            env={**child_environment(os.environ), "GIT_OPTIONAL_LOCKS": "0"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,  # never our stdout: it carries the protocol
            stderr=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return sorted({name for name in names if name})


# --- walking with .gitignore ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    base: str
    """Directory of the `.gitignore`, relative to the walk's root ("" for the root)."""
    pattern: re.Pattern[str]
    negated: bool
    directories_only: bool
    anchored: bool
    """Matched against the path below `base` rather than against the name alone."""

    def matches(self, relative: str, is_dir: bool) -> bool:
        if self.directories_only and not is_dir:
            return False
        if self.base:
            if not relative.startswith(self.base + "/"):
                return False
            relative = relative[len(self.base) + 1 :]
        subject = relative if self.anchored else relative.rsplit("/", 1)[-1]
        return self.pattern.fullmatch(subject) is not None


def parse_gitignore(text: str, base: str = "") -> list[IgnoreRule]:
    rules: list[IgnoreRule] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        line = line[1:] if negated else line
        if line.startswith("\\"):  # `\#file` and `\!file` name files starting with # or !
            line = line[1:]
        directories_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if line:
            rules.append(IgnoreRule(base, glob_regex(line), negated, directories_only, anchored))
    return rules


def is_ignored(relative: str, is_dir: bool, rules: list[IgnoreRule]) -> bool:
    """The last matching rule decides, as in git."""
    ignored = False
    for rule in rules:
        if rule.matches(relative, is_dir):
            ignored = not rule.negated
    return ignored


def _walk(root: Path, check: Callable[[], None]) -> Iterator[Path]:
    rules_by_dir: dict[str, list[IgnoreRule]] = {}
    for directory, dirnames, filenames in os.walk(root):
        check()
        relative_dir = Path(directory).relative_to(root).as_posix()
        relative_dir = "" if relative_dir == "." else relative_dir
        parent = relative_dir.rsplit("/", 1)[0] if "/" in relative_dir else ""
        inherited = rules_by_dir.get(parent, []) if relative_dir else []
        rules = inherited + _read_rules(Path(directory) / ".gitignore", relative_dir)
        rules_by_dir[relative_dir] = rules
        prefix = f"{relative_dir}/" if relative_dir else ""
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in ALWAYS_SKIPPED and not is_ignored(prefix + name, True, rules)
        )
        for name in sorted(filenames):
            if not is_ignored(prefix + name, False, rules):
                path = Path(directory) / name
                if path.is_file():
                    yield path


def _read_rules(path: Path, base: str) -> list[IgnoreRule]:
    try:
        return parse_gitignore(path.read_text(encoding="utf-8", errors="replace"), base)
    except OSError:
        return []


# --- glob patterns -------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over `/`-separated paths.

    `*` and `?` stay within one path segment, `**` spans segments (`a/**/b` matches `a/b`),
    `[...]` is a class (`[!...]` negated) and `{x,y}` an alternative.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (end := _class_end(pattern, i)) != -1:
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif char == "{" and (end := pattern.find("}", i)) != -1:
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(o).pattern for o in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _class_end(pattern: str, start: int) -> int:
    """Index of the `]` closing the class opened at `start`, or -1."""
    i = start + 1
    if i < len(pattern) and pattern[i] in "!^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    return pattern.find("]", i)


__all__ = ["glob_regex", "is_ignored", "list_files", "parse_gitignore"]
