"""read_file: the editor's view of a file (unsaved buffers included), a page at a time."""

from __future__ import annotations

from pathlib import Path

import anyio
from pydantic import Field

from ..messages import Location
from .base import Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

MAX_LINES = 2000
MAX_CHARS = 100_000


class ReadFileParams(ToolParams):
    path: str = Field(description="File to read: absolute, or relative to the working directory.")
    line: int | None = Field(None, ge=1, description="First line to read (1-based).")
    limit: int | None = Field(None, ge=1, description=f"Lines to read (at most {MAX_LINES}).")


class ReadFile(Tool[ReadFileParams]):
    name = "read_file"
    kind = "read"
    description = (
        "Read a text file as the editor has it (including unsaved changes). Lines come "
        f"numbered. Reads at most {MAX_LINES} lines or {MAX_CHARS} characters per call; "
        "use `line` and `limit` to page through longer files."
    )
    params_model = ReadFileParams

    def title(self, params: ReadFileParams, ctx: ToolContext) -> str:
        path = ctx.resolve(params.path)
        if params.line is None and params.limit is None:
            return f"Read {path}"
        first = params.line or 1
        last = f"{first + params.limit - 1}" if params.limit else "end"
        return f"Read {path} (lines {first}-{last})"

    def locations(self, params: ReadFileParams, ctx: ToolContext) -> tuple[Location, ...]:
        return (Location(str(ctx.resolve(params.path)), params.line or 1),)

    def paths(self, params: ReadFileParams, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),)

    async def run(self, params: ReadFileParams, ctx: ToolContext) -> ToolOutcome:
        path = ctx.resolve(params.path)
        first = params.line or 1
        wanted = min(params.limit or MAX_LINES, MAX_LINES)
        # One line more than we show tells whether the file goes on.
        text = await _read(ctx, path, first, wanted + 1)
        lines = text.splitlines()
        more_lines = len(lines) > wanted
        lines = lines[:wanted]
        numbered, shown = _number(lines, first)
        last = first + shown - 1
        notice = ""
        if shown < len(lines) or more_lines:
            notice = (
                f"\n[showing lines {first}-{last}; the file continues: "
                f"call read_file with line={last + 1} to read further]"
            )
        if not lines:
            numbered = f"[no lines at or after line {first}]" if first > 1 else "[empty file]"
        return ToolOutcome(
            model_text=numbered + notice,
            locations=(Location(str(path), first),),
            title=f"Read {path} (lines {first}-{max(last, first)})",
        )


async def _read(ctx: ToolContext, path: Path, line: int, limit: int) -> str:
    if ctx.editor.can_read_files:
        return await ctx.editor.read_text_file(str(path), line, limit)
    return await _read_locally(path, line, limit)


async def _read_locally(path: Path, line: int, limit: int) -> str:
    try:
        async with await anyio.open_file(path, encoding="utf-8", errors="replace") as handle:
            lines: list[str] = []
            number = 0
            async for text in handle:
                number += 1
                if number >= line:
                    lines.append(text)
                    if len(lines) >= limit:
                        break
            return "".join(lines)
    except FileNotFoundError:
        raise ToolFailed(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ToolFailed(f"{path} is a directory, not a file") from None
    except OSError as exc:
        raise ToolFailed(f"cannot read {path}: {exc.strerror or exc}") from None


def _number(lines: list[str], first: int) -> tuple[str, int]:
    """Lines prefixed with their numbers, cut at MAX_CHARS; returns the text and lines shown."""
    out: list[str] = []
    size = 0
    for offset, line in enumerate(lines):
        entry = f"{first + offset:>6}\t{line}"
        size += len(entry) + 1
        if size > MAX_CHARS and out:
            break
        out.append(entry[:MAX_CHARS])
    return "\n".join(out), len(out)
