"""edit_file: exact string replacement, one edit or several applied all-or-nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..messages import DiffContent, Location, ToolContent
from ._files import read_current, write_text
from ._text import first_changed_line, line_of, plural
from .base import ChangesOneFile, Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

MAX_LISTED_MATCHES = 5

_OLD_TEXT = (
    "Exact text to replace, including whitespace and indentation. It must occur exactly once "
    "in the file unless replace_all is set; include surrounding lines to make it unique."
)
_NEW_TEXT = "Text to put in its place (empty to delete it)."
_REPLACE_ALL = "Replace every occurrence instead of requiring exactly one."


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    old_text: str = Field(min_length=1, description=_OLD_TEXT)
    new_text: str = Field(description=_NEW_TEXT)
    replace_all: bool = Field(False, description=_REPLACE_ALL)


class EditFileParams(ToolParams):
    path: str = Field(description="File to edit: absolute, or relative to the working directory.")
    old_text: str | None = Field(None, min_length=1, description=_OLD_TEXT)
    new_text: str | None = Field(None, description=_NEW_TEXT)
    replace_all: bool = Field(False, description=_REPLACE_ALL)
    edits: list[Edit] | None = Field(
        None,
        min_length=1,
        description="Several edits to the same file, applied in order, each to the result of "
        "the previous one. If any edit fails, none is applied. Use instead of old_text / "
        "new_text.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        single = self.old_text is not None or self.new_text is not None
        if single and self.edits is not None:
            raise ValueError("give either old_text and new_text, or edits, not both")
        if self.edits is None and (self.old_text is None or self.new_text is None):
            raise ValueError("give old_text and new_text (or a list of edits)")
        return self

    def all_edits(self) -> list[Edit]:
        if self.edits is not None:
            return self.edits
        assert self.old_text is not None and self.new_text is not None
        return [Edit(old_text=self.old_text, new_text=self.new_text, replace_all=self.replace_all)]


class EditFile(ChangesOneFile, Tool[EditFileParams]):
    """Change part of an existing file by replacing exact text. `old_text` must match the file
    exactly (whitespace included) and only once, unless `replace_all` is set. For several
    changes to one file pass `edits`: they apply in order, all or none. Read the file first; use
    write_file to create files."""

    name = "edit_file"
    verb = "Edit"
    params_model = EditFileParams

    async def preview(self, params: EditFileParams, ctx: ToolContext) -> tuple[ToolContent, ...]:
        path, old, new, _ = await _planned(params, ctx)
        return (DiffContent(str(path), old, new),)

    async def run(self, params: EditFileParams, ctx: ToolContext) -> ToolOutcome:
        # Read again: the file may have changed while the user looked at the preview.
        path, old, new, counts = await _planned(params, ctx)
        edits = params.all_edits()
        await write_text(ctx, path, new)
        line = first_changed_line(old, new)
        replacements = plural(sum(counts), "replacement")
        summary = replacements
        if len(edits) > 1:
            summary = f"{plural(len(edits), 'edit')}, {replacements}"
        return ToolOutcome(
            model_text=f"Edited {path} ({summary}); first change at line {line}.",
            display=(DiffContent(str(path), old, new),),
            locations=(Location(str(path), line),),
            raw_output={
                "path": str(path),
                "edits": len(edits),
                "replacements": sum(counts),
                "first_changed_line": line,
            },
        )


async def _planned(params: EditFileParams, ctx: ToolContext) -> tuple[Path, str, str, list[int]]:
    """The file's path, its text now, its text once edited, and the replacements per edit;
    nothing is written."""
    path = ctx.resolve(params.path)
    old = await read_current(ctx, path)
    if old is None:
        raise ToolFailed(f"{path}: no such file. Use write_file to create a new file.")
    new, counts = apply_edits(old, params.all_edits(), str(path))
    return path, old, new, counts


def apply_edits(text: str, edits: list[Edit], path: str) -> tuple[str, list[int]]:
    """`text` with every edit applied in order, and how many places each edit changed.

    Works on a copy: the first failing edit raises and the caller writes nothing.
    """
    counts: list[int] = []
    for number, edit in enumerate(edits, start=1):
        where = f"edit {number} of {len(edits)}: " if len(edits) > 1 else ""
        try:
            text, count = _apply(text, edit, path)
        except ToolFailed as exc:
            unchanged = " No edit was applied." if len(edits) > 1 else ""
            raise ToolFailed(f"{where}{exc}{unchanged}") from None
        counts.append(count)
    return text, counts


def _apply(text: str, edit: Edit, path: str) -> tuple[str, int]:
    if edit.old_text == edit.new_text:
        raise ToolFailed("old_text and new_text are the same; there is nothing to change.")
    old, new = _with_file_line_endings(text, edit.old_text, edit.new_text)
    count = text.count(old)
    if count == 0:
        raise ToolFailed(_not_found(text, old, path))
    if count > 1 and not edit.replace_all:
        raise ToolFailed(_ambiguous(text, old, count, path))
    return text.replace(old, new, -1 if edit.replace_all else 1), count


def _with_file_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """Models write LF; a CRLF file still matches, and keeps CRLF in the new text."""
    if old not in text and "\r\n" in text and "\r" not in old:
        return old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    return old, new


def _not_found(text: str, old: str, path: str) -> str:
    message = f"old_text was not found in {path}."
    near = _whitespace_insensitive_match(text, old)
    if near is not None:
        return (
            f"{message} Line {near} has the same text with different whitespace or "
            "indentation: copy it exactly as the file has it."
        )
    return f"{message} Read the file again and copy the text exactly, whitespace included."


def _ambiguous(text: str, old: str, count: int, path: str) -> str:
    lines: list[int] = []
    start = text.find(old)
    while start != -1 and len(lines) < MAX_LISTED_MATCHES:
        lines.append(line_of(text, start))
        start = text.find(old, start + len(old))
    listed = ", ".join(map(str, lines)) + (", ..." if count > len(lines) else "")
    return (
        f"old_text matches {count} places in {path} (lines {listed}). Include more "
        "surrounding lines to make it unique, or set replace_all to change every occurrence."
    )


def _whitespace_insensitive_match(text: str, old: str) -> int | None:
    """The first line where `old`'s lines appear with only whitespace differing."""
    wanted = [line.strip() for line in old.strip().splitlines()]
    if not wanted or not any(wanted):
        return None
    have = [line.strip() for line in text.splitlines()]
    for start in range(len(have) - len(wanted) + 1):
        if have[start : start + len(wanted)] == wanted:
            return start + 1
    return None
