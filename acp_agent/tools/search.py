"""search: find files by name (glob) and lines by content (regex) in the workspace.

Runs locally in a worker thread: ACP has no client call for searching, and reading what the
user sees in unsaved buffers matters less here than in read_file (the model reads a file
before editing it). Ignored files (`.gitignore`) are left out; output is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import anyio
import anyio.from_thread
from pydantic import Field, model_validator

from ..messages import Location, TextPart
from ._filelist import glob_regex, list_files
from ._text import display_path, fenced, plural, split_lines
from .base import Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS = 1000
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 2 * 1024 * 1024
"""Larger files are skipped by content search (logs, data, bundles)."""
BINARY_SNIFF_BYTES = 8192


class SearchParams(ToolParams):
    glob: str | None = Field(
        None,
        description="File name pattern. Without a `/` it matches names at any depth (`*.py`, "
        "`test_*.py`); with one, paths relative to the workspace root (`src/**/*.ts`). "
        "`**` spans directories, `{a,b}` gives alternatives.",
    )
    grep: str | None = Field(
        None,
        description="Regular expression (Python syntax) to find in file contents; matching "
        "lines are listed with their line numbers. Combine with glob to search only some files.",
    )
    path: str | None = Field(
        None,
        description="Directory (or file) to search in: absolute or relative to the working "
        "directory. Default: the whole workspace.",
    )
    ignore_case: bool = Field(False, description="Match grep case-insensitively.")
    max_results: int = Field(
        DEFAULT_MAX_RESULTS,
        ge=1,
        le=MAX_RESULTS,
        description="Most files (glob only) or matching lines (grep) to list.",
    )

    @model_validator(mode="after")
    def _something_to_find(self) -> Self:
        if not self.glob and not self.grep:
            raise ValueError("give glob, grep or both")
        return self


class Search(Tool[SearchParams]):
    name = "search"
    kind = "search"
    description = (
        "Find files by name pattern (glob) and/or lines matching a regular expression (grep) "
        "in the workspace, skipping files ignored by .gitignore. Results are capped; narrow "
        "the pattern or the path when told there are more."
    )
    params_model = SearchParams

    def title(self, params: SearchParams, ctx: ToolContext) -> str:
        parts = []
        if params.grep:
            parts.append(f"grep {params.grep!r}")
        if params.glob:
            parts.append(f"files {params.glob}")
        where = f" in {ctx.resolve(params.path)}" if params.path else ""
        return "Search " + ", ".join(parts) + where

    def paths(self, params: SearchParams, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),) if params.path else ()

    async def run(self, params: SearchParams, ctx: ToolContext) -> ToolOutcome:
        pattern = _compile(params) if params.grep else None
        targets = _targets(params, ctx)
        found = await anyio.to_thread.run_sync(_search, params, pattern, targets)
        return _outcome(found, params, ctx)


@dataclass
class _Found:
    files: list[Path] = field(default_factory=list)
    """Files listed (glob only), up to max_results."""
    lines: list[tuple[Path, int, str]] = field(default_factory=list)
    """Matching lines (grep), up to max_results."""
    total: int = 0
    """Every file (glob only) or matching line (grep), listed or not."""
    matched_files: set[Path] = field(default_factory=set)
    skipped_large: int = 0


def _compile(params: SearchParams) -> re.Pattern[str]:
    assert params.grep is not None
    try:
        return re.compile(params.grep, re.IGNORECASE if params.ignore_case else 0)
    except re.error as exc:
        raise ToolFailed(f"grep is not a valid regular expression: {exc}") from None


def _targets(params: SearchParams, ctx: ToolContext) -> list[Path]:
    """Directories (or one file) to search, without roots nested in other roots."""
    if params.path:
        target = ctx.resolve(params.path)
        if not target.exists():
            raise ToolFailed(f"{target}: no such file or directory")
        return [target]
    candidates = list(dict.fromkeys((ctx.cwd, *ctx.roots)))  # cwd first, order kept
    return [
        root
        for root in candidates
        if not any(root != other and root.is_relative_to(other) for other in candidates)
    ]


def _search(params: SearchParams, pattern: re.Pattern[str] | None, targets: list[Path]) -> _Found:
    """Blocking: runs in a worker thread and stops when the calling task is cancelled."""
    found = _Found()
    for path in _candidates(params, targets):
        if pattern is None:
            found.total += 1
            if len(found.files) < params.max_results:
                found.files.append(path)
        else:
            _grep_file(path, pattern, params.max_results, found)
    return found


def _candidates(params: SearchParams, targets: list[Path]) -> Iterator[Path]:
    name_pattern = glob_regex(_normalise_glob(params.glob)) if params.glob else None
    by_name = params.glob is not None and "/" not in _normalise_glob(params.glob)
    seen: set[Path] = set()
    for target in targets:
        files = [target] if target.is_file() else list_files(target, _check_cancelled)
        root = target.parent if target.is_file() else target
        for path in files:
            if path in seen:
                continue
            seen.add(path)
            if name_pattern is not None:
                subject = path.name if by_name else path.relative_to(root).as_posix()
                if not name_pattern.fullmatch(subject):
                    continue
            yield path


def _normalise_glob(glob: str | None) -> str:
    return (glob or "").removeprefix("./").lstrip("/")


def _check_cancelled() -> None:
    anyio.from_thread.check_cancelled()


def _grep_file(path: Path, pattern: re.Pattern[str], limit: int, found: _Found) -> None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            found.skipped_large += 1
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return
    _check_cancelled()
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(split_lines(text), start=1):
        if pattern.search(line):
            found.total += 1
            found.matched_files.add(path)
            if len(found.lines) < limit:
                found.lines.append((path, number, _clip(line)))


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"


def _outcome(found: _Found, params: SearchParams, ctx: ToolContext) -> ToolOutcome:
    def show(path: Path) -> str:
        return display_path(path, ctx.cwd)

    if params.grep:
        listed = [f"{show(path)}:{number}: {line}" for path, number, line in found.lines]
        shown, unit = len(found.lines), "matching line"
        locations = tuple(Location(str(path), number) for path, number, _ in found.lines[:20])
        files_note = f" in {plural(len(found.matched_files), 'file')}"
    else:
        listed = [show(path) for path in found.files]
        shown, unit = len(found.files), "file"
        locations = tuple(Location(str(path)) for path in found.files[:20])
        files_note = ""
    notes: list[str] = []
    if shown < found.total:
        notes.append(
            f"[showing {shown} of {found.total} {unit}s{files_note}; narrow the search "
            "(glob, path, a more specific pattern) or raise max_results]"
        )
    if found.skipped_large:
        notes.append(
            f"[{plural(found.skipped_large, 'file')} over {MAX_FILE_BYTES // 1024 // 1024} MiB "
            "not searched]"
        )
    if not listed:
        text = f"No {unit}s found."
    else:
        header = f"{plural(found.total, unit)}{files_note} (paths relative to {ctx.cwd}):"
        text = header + "\n" + "\n".join(listed)
    answer = "\n".join([text, *notes])
    return ToolOutcome(
        model_text=answer,
        display=(TextPart(fenced(answer)),),
        locations=locations,
        raw_output={"found": found.total, "listed": shown, "unit": unit},
    )
