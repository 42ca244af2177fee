"""search: find files by name (glob) and lines by content (regex) in the workspace.

Runs locally: ACP has no client call for searching, and reading what the user sees in
unsaved buffers matters less here than in read_file (the model reads a file before editing
it). The work happens in a child process, ripgrep (`_ripgrep`), or our Python fallback when
`rg` is missing, so a cancel or the deadline ends it whatever the pattern. Ignored files
(`.gitignore`), binary files, large files and symlinks are left out; output is bounded: the
child is stopped once max_results hits are in, so a huge result never sits in memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import anyio
from pydantic import Field, model_validator

from ..child_env import child_environment
from ..messages import Location, TextPart
from ._filelist import glob_regex
from ._ripgrep import BINARY_SNIFF_BYTES, MAX_FILE_BYTES, Hit, SearchRequest, run_search
from ._text import display_path, fenced, plural
from .base import Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS = 1000
MAX_LINE_CHARS = 300
SEARCH_DEADLINE_SECONDS = 30.0
"""A search still running after this long is stopped; the model gets what it found."""


class SearchParams(ToolParams):
    glob: str | None = Field(
        None,
        description="File name pattern. Without a `/` it matches names at any depth (`*.py`, "
        "`test_*.py`); with one, paths relative to the workspace root (`src/**/*.ts`). "
        "`**` spans directories, `{a,b}` gives alternatives.",
    )
    grep: str | None = Field(
        None,
        description="Regular expression to find in file contents, in ripgrep's (Rust regex) "
        "syntax: like Python's, without look-around or backreferences. Matching lines are "
        "listed with their line numbers; binary files and files over 2 MiB are not searched. "
        "Combine with glob to search only some files.",
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
    """Find files by name pattern (glob) and/or lines matching a regular expression (grep) in the
    workspace, skipping files ignored by .gitignore. Results are capped; narrow the pattern or
    the path when told there are more."""

    name = "search"
    kind = "search"
    params_model = SearchParams

    def title(self, params: SearchParams, ctx: ToolContext) -> str:
        parts = []
        if params.grep:
            parts.append(f"grep {params.grep!r}")
        if params.glob:
            parts.append(f"files {params.glob}")
        where = f" in {display_path(ctx.resolve(params.path), ctx.cwd)}" if params.path else ""
        return "Search " + ", ".join(parts) + where

    def paths(self, params: SearchParams, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),) if params.path else ()

    async def run(self, params: SearchParams, ctx: ToolContext) -> ToolOutcome:
        if params.grep and "\0" in params.grep:
            raise ToolFailed("grep cannot contain a NUL character")
        targets = _targets(params, ctx)
        env = ctx.child_env if ctx.child_env is not None else child_environment(os.environ)
        found = _Found(params.max_results)
        with anyio.move_on_after(SEARCH_DEADLINE_SECONDS) as deadline:
            for target, root in targets:
                await _search(target, root, params, env, found)
                if found.more:
                    break
        found.timed_out = deadline.cancelled_caught
        return _outcome(found, params, ctx)


@dataclass
class _Found:
    limit: int
    hits: list[Hit] = field(default_factory=list)
    """Files (glob only) or matching lines (grep), up to `limit`."""
    more: bool = False
    """A hit beyond `limit` came: the search stopped there."""
    timed_out: bool = False

    def add(self, hit: Hit) -> bool:
        """Keep `hit`; False once the search should stop."""
        if len(self.hits) < self.limit:
            self.hits.append(hit)
        else:
            self.more = True
        return not self.more


def _targets(params: SearchParams, ctx: ToolContext) -> list[tuple[Path, Path]]:
    """Directories (or one file) to search, each with the directory a glob with a `/` is
    relative to; roots nested in other roots left out."""
    if params.path:
        target = ctx.resolve(params.path)
        if not target.exists():
            raise ToolFailed(f"{target}: no such file or directory")
        if target.is_dir():
            return [(target, target)]
        if not target.is_file():  # a FIFO would block the search
            raise ToolFailed(f"{target} is not a regular file or a directory")
        return [] if params.grep and _too_large_or_binary(target) else [(target, target.parent)]
    candidates = list(dict.fromkeys((ctx.cwd, *ctx.roots)))  # cwd first, order kept
    return [
        (root, root)
        for root in candidates
        if not any(root != other and root.is_relative_to(other) for other in candidates)
    ]


async def _search(
    target: Path, root: Path, params: SearchParams, env: Mapping[str, str], found: _Found
) -> None:
    glob = _normalise_glob(params.glob) if params.glob else None
    accepts = _glob_filter(glob, root)
    by_name = glob if glob and "/" not in glob else None
    request = SearchRequest(target, params.grep, params.ignore_case, by_name)
    await run_search(request, env=env, on_hit=lambda hit: not accepts(hit.path) or found.add(hit))


def _normalise_glob(glob: str) -> str:
    return glob.removeprefix("./").lstrip("/")


def _glob_filter(glob: str | None, root: Path) -> Callable[[Path], bool]:
    """Our glob semantics, for every hit: the child's own filter only narrows (ripgrep's
    `--glob` would bring back files `.gitignore` leaves out, so it is not used)."""
    if glob is None:
        return lambda path: True
    pattern = glob_regex(glob)
    if "/" in glob:
        return lambda path: pattern.fullmatch(path.relative_to(root).as_posix()) is not None
    return lambda path: pattern.fullmatch(path.name) is not None


def _too_large_or_binary(path: Path) -> bool:
    """For a file given as the path, which ripgrep would search whatever it holds."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return True
        with path.open("rb") as handle:
            return b"\0" in handle.read(BINARY_SNIFF_BYTES)
    except OSError:
        return True


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"


def _outcome(found: _Found, params: SearchParams, ctx: ToolContext) -> ToolOutcome:
    def show(path: Path) -> str:
        return display_path(path, ctx.cwd)

    hits = found.hits
    if params.grep:
        listed = [f"{show(hit.path)}:{hit.line_number}: {_clip(hit.text)}" for hit in hits]
        unit = "matching line"
        locations = tuple(Location(str(hit.path), hit.line_number) for hit in hits[:20])
        files_note = f" in {plural(len({hit.path for hit in hits}), 'file')}"
    else:
        listed = [show(hit.path) for hit in hits]
        unit = "file"
        locations = tuple(Location(str(hit.path)) for hit in hits[:20])
        files_note = ""
    notes: list[str] = []
    if found.more:
        notes.append(
            f"[showing the first {plural(len(hits), unit)}{files_note}; there are more: narrow "
            "the search (glob, path, a more specific pattern) or raise max_results]"
        )
    if found.timed_out:
        notes.append(
            f"[the search took longer than {SEARCH_DEADLINE_SECONDS:g} s and was stopped; "
            "these are the results found so far: narrow the path or the glob, or simplify "
            "the pattern]"
        )
    if not listed:
        text = f"No {unit}s found."
    else:
        header = f"{plural(len(hits), unit)}{files_note} (paths relative to {ctx.cwd}):"
        text = header + "\n" + "\n".join(listed)
    answer = "\n".join([text, *notes])
    return ToolOutcome(
        model_text=answer,
        display=(TextPart(fenced(answer)),),
        locations=locations,
        raw_output={
            "listed": len(hits),
            "unit": unit,
            "more": found.more,
            "timed_out": found.timed_out,
        },
    )
