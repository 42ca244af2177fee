"""write_file: create a file or replace its whole content, shown to the user as a diff."""

from __future__ import annotations

from pydantic import Field

from ..messages import DiffContent, Location, ToolContent
from ._files import read_current, write_text
from ._text import count_lines, first_changed_line, plural
from .base import ChangesOneFile, Tool, ToolContext, ToolOutcome, ToolParams


class WriteFileParams(ToolParams):
    path: str = Field(
        description="File to write: absolute, or relative to the working directory. Missing "
        "parent directories are created."
    )
    content: str = Field(description="The complete new content of the file.")


class WriteFile(ChangesOneFile, Tool[WriteFileParams]):
    """Create a new file, or replace the entire content of an existing one. For changes to part of
    an existing file prefer edit_file: it is shorter and cannot drop text by accident. Read a
    file before overwriting it."""

    name = "write_file"
    verb = "Write"
    params_model = WriteFileParams

    async def preview(self, params: WriteFileParams, ctx: ToolContext) -> tuple[ToolContent, ...]:
        path = ctx.resolve(params.path)
        old = await read_current(ctx, path)
        return (DiffContent(str(path), old, params.content),)

    async def run(self, params: WriteFileParams, ctx: ToolContext) -> ToolOutcome:
        # Read again: the file may have changed while the user looked at the preview.
        path = ctx.resolve(params.path)
        old = await read_current(ctx, path)
        new = params.content
        line = first_changed_line(old or "", new)
        display = (DiffContent(str(path), old, new),)
        locations = (Location(str(path), line),)
        summary = {
            "path": str(path),
            "created": old is None,
            "changed": old != new,
            "lines": count_lines(new),
            "bytes": len(new.encode("utf-8")),
        }
        if old == new:
            return ToolOutcome(
                model_text=f"{path} already had exactly this content; nothing was written.",
                locations=locations,
                raw_output=summary,
            )
        await write_text(ctx, path, new)
        size = plural(count_lines(new), "line")
        if old is None:
            text = f"Created {path} ({size})."
        else:
            text = f"Wrote {path} ({size}, was {count_lines(old)}); first change at line {line}."
        return ToolOutcome(
            model_text=text, display=display, locations=locations, raw_output=summary
        )
