"""read_file: the editor's view of a file (unsaved buffers included), a page at a time; an
image (PNG, JPEG, GIF, WebP by its bytes) as the image itself (see `_images`)."""

from __future__ import annotations

import base64
from pathlib import Path

from pydantic import Field

from ..messages import ImagePart, Location, TextPart
from ._files import read_page
from ._images import DiskImage, read_image
from ._text import display_path, fenced, split_lines
from .base import Tool, ToolContext, ToolOutcome, ToolParams

MAX_LINES = 2000
MAX_CHARS = 100_000
DISPLAY_CHARS = 20_000
"""What the user sees of a read in the tool call (the model reads up to MAX_CHARS)."""


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
        "use `line` and `limit` to page through longer files. An image (PNG, JPEG, GIF, "
        "WebP) comes as the image itself, scaled down when large."
    )
    params_model = ReadFileParams

    def title(self, params: ReadFileParams, ctx: ToolContext) -> str:
        where = display_path(ctx.resolve(params.path), ctx.cwd)
        if params.line is None and params.limit is None:
            return f"Read {where}"
        first = params.line or 1
        last = f"{first + params.limit - 1}" if params.limit else "end"
        return f"Read {where} (lines {first}-{last})"

    def locations(self, params: ReadFileParams, ctx: ToolContext) -> tuple[Location, ...]:
        return (Location(str(ctx.resolve(params.path)), params.line or 1),)

    def paths(self, params: ReadFileParams, ctx: ToolContext) -> tuple[Path, ...]:
        return (ctx.resolve(params.path),)

    async def run(self, params: ReadFileParams, ctx: ToolContext) -> ToolOutcome:
        path = ctx.resolve(params.path)
        # The disk decides what is an image (the editor's fs serves text only); a file the
        # disk does not have, or holds as text, is read through the editor as before.
        image = await read_image(path)
        if image is not None:
            return _image_outcome(path, image, display_path(path, ctx.cwd))
        first = params.line or 1
        wanted = min(params.limit or MAX_LINES, MAX_LINES)
        # One line more than we show tells whether the file goes on.
        text = await read_page(ctx, path, first, wanted + 1)
        lines = split_lines(text)
        more_lines = len(lines) > wanted
        lines = lines[:wanted]
        numbered, shown = _number(lines, first)
        last = first + shown - 1
        notice = ""
        if any(len(line) > MAX_CHARS for line in lines[:shown]):
            notice += f"\n[lines longer than {MAX_CHARS} characters were cut]"
        if shown < len(lines) or more_lines:
            notice += (
                f"\n[showing lines {first}-{last}; the file continues: "
                f"call read_file with line={last + 1} to read further]"
            )
        if not lines:
            numbered = f"[no lines at or after line {first}]" if first > 1 else "[empty file]"
        shown_lines = [line[:MAX_CHARS] for line in lines[:shown]]
        return ToolOutcome(
            model_text=numbered + notice,
            display=(TextPart(_display(shown_lines, first, path, ctx) if lines else numbered),),
            locations=(Location(str(path), first),),
            title=_read_title(path, ctx, first, shown),
            raw_output={
                "path": str(path),
                "line": first,
                "lines": shown,
                "bytes": sum(len(line.encode("utf-8")) + 1 for line in shown_lines),
                "continues": shown < len(lines) or more_lines,
            },
        )


def _read_title(path: Path, ctx: ToolContext, first: int, shown: int) -> str:
    """What was read: its range, or that there was nothing to read (no `lines 1-1` for an
    empty file)."""
    where = display_path(path, ctx.cwd)
    if shown == 0:
        return (
            f"Read {where} (empty)"
            if first == 1
            else f"Read {where} (nothing after line {first - 1})"
        )
    return f"Read {where} (lines {first}-{first + shown - 1})"


def _image_outcome(path: Path, image: DiskImage, where: str) -> ToolOutcome:
    """The image for the model, after a line saying what it is and what was done to it; a
    model that reads no images gets a note in its place when the request is made."""
    text = f"Image {path}: {image.summary()}"
    return ToolOutcome(
        model_text=text,
        model_parts=(
            TextPart(text),
            ImagePart(base64.b64encode(image.data).decode("ascii"), image.mime_type),
        ),
        display=(TextPart(text),),
        locations=(Location(str(path)),),
        title=f"Read {where}",
        raw_output={
            "path": str(path),
            "mime_type": image.mime_type,
            "width": image.size.width,
            "height": image.size.height,
            "bytes": len(image.data),
            "scaled": image.scaled,
        },
    )


def _display(lines: list[str], first: int, path: Path, ctx: ToolContext) -> str:
    """The lines read, fenced under their path and range (`a.py#L3-9`, which Zed shows as
    a file excerpt), cut to DISPLAY_CHARS: the user sees what the model read."""
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > DISPLAY_CHARS and kept:
            break
        kept.append(line[:DISPLAY_CHARS])
    last = first + len(kept) - 1
    where = display_path(path, ctx.cwd)
    info = f"{where}#L{first}-{last}" if _fits_info_string(where) else ""
    text = fenced("\n".join(kept), info)
    if len(kept) < len(lines):
        text += f"\n[{len(lines) - len(kept)} more lines were read; not shown here]"
    return text


def _fits_info_string(path: str) -> bool:
    """A fence's info string ends at whitespace and may not hold a backtick."""
    return not any(c.isspace() or c == "`" for c in path)


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
