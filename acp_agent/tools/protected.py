"""Places a write must always ask about: what would let one prompt injection make itself
permanent.

- the repository's own machinery: anything under a `.git` directory (config, hooks: git runs
  programs named there on later, innocent commands);
- what agents read as instructions or settings: `.agents/` and `.claude/` directories, and
  `AGENTS.md` / `CLAUDE.md` files, at any depth (the agent loads them into its own prompt);
- the agent's own config and credential files, and what lies below a protected directory
  of its (`ToolContext.protected_files`).

Writes there ask in every mode but `bypass`, and no "always" answer is offered or applies.
Names are compared case-insensitively: on macOS and Windows `agents.md` is `AGENTS.md`.
Both the path as written and as the kernel resolves it are judged, so a symlink named
`notes.txt` that points into `.git/` is caught.
"""

from __future__ import annotations

import os.path
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from .base import ToolContext

PROTECTED_DIRECTORIES = frozenset({".git", ".agents", ".claude"})
PROTECTED_FILES = frozenset({"agents.md", "claude.md"})


def protected_reason(path: Path, ctx: ToolContext) -> str | None:
    """Why writing `path` must always ask (a short phrase for the user), or None."""
    for candidate in _forms(path, ctx):
        if any(candidate.is_relative_to(own) for own in _resolved(ctx.protected_files)):
            return "the agent's own configuration"
        names = [name.casefold() for name in _names_below_root(candidate, ctx)]
        for name in names[:-1]:
            if name in PROTECTED_DIRECTORIES:
                return f"inside {name}/"
        if names and names[-1] in PROTECTED_DIRECTORIES:
            return f"the {names[-1]} directory"
        if names and names[-1] in PROTECTED_FILES:
            return "an instruction file the agent reads"
    return None


def _forms(path: Path, ctx: ToolContext) -> list[Path]:
    """The path with `..` folded, and as the kernel resolves it (symlinks followed)."""
    absolute = path if path.is_absolute() else ctx.cwd / path
    forms = [Path(os.path.normpath(absolute))]
    with suppress(OSError, RuntimeError):  # a symlink loop: the folded form is all we have
        forms.append(absolute.resolve())
    return forms


def _names_below_root(path: Path, ctx: ToolContext) -> tuple[str, ...]:
    """The path's components below the session root that holds it (the project may itself
    live under a `.claude` directory); all of them for a path outside every root."""
    for root in ctx.roots:
        for form in {Path(os.path.normpath(root)), _safe_resolve(root)}:
            if path.is_relative_to(form):
                return path.relative_to(form).parts
    return path.parts[1:]


def _resolved(paths: Iterable[Path]) -> list[Path]:
    return [_safe_resolve(path) for path in paths]


def _safe_resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.normpath(path))


__all__ = ["PROTECTED_DIRECTORIES", "PROTECTED_FILES", "protected_reason"]
