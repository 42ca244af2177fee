"""Whole-file reads and writes for the editing tools: through the editor when the client
offers it (its unsaved buffers are the truth the user sees), else on the local disk."""

from __future__ import annotations

import os.path
import re
from pathlib import Path

import anyio

from .base import ToolContext, ToolFailed
from .local import LocalEditor

# How clients word "no such file" (acpx, Zed, the Python SDK's example client, plain errno).
_MISSING = re.compile(
    r"not found|no such file|does not exist|doesn't exist|ENOENT|cannot find|"
    r"couldn't find|could not find|not exist",
    re.IGNORECASE,
)


async def read_current(ctx: ToolContext, path: Path) -> str | None:
    """The file's text as the editor has it, or None when the file does not exist.

    A client answers a read of a missing file with an error whose wording varies; a failed
    read counts as "missing" only when the local disk agrees (inside the roots, where the
    editor and we see the same files) or the message says so. Anything else fails: writing
    over a file we could not read would lose the user's text.
    """
    if not ctx.editor.can_read_files:
        return await LocalEditor().read_exact(str(path))
    try:
        text = await ctx.editor.read_text_file(str(path), None, None)
    except ToolFailed as exc:
        if ctx.inside_roots(path):
            if not await anyio.to_thread.run_sync(os.path.lexists, path):
                return None
            raise
        if _MISSING.search(str(exc)):
            return None
        raise
    if not text and await missing_locally(ctx, path):
        return None
    return text


async def missing_locally(ctx: ToolContext, path: Path) -> bool:
    """Whether the local disk shows `path` does not exist, where the disk can tell.

    Some clients (Toad, CodeCompanion) answer a read of a missing file with empty content
    instead of an error: taken as it is, the model believes the file exists and a new file
    is reported as an overwrite. The disk can tell where the session's cwd is a directory
    here (the editor and we see the same machine's files); elsewhere the empty content
    stands.
    """
    return await anyio.to_thread.run_sync(_absent, path, ctx.cwd)


def _absent(path: Path, cwd: Path) -> bool:
    return cwd.is_dir() and not os.path.lexists(path)


async def write_text(ctx: ToolContext, path: Path, content: str) -> None:
    if ctx.editor.can_write_files:
        await ctx.editor.write_text_file(str(path), content)
    else:
        await LocalEditor().write_text_file(str(path), content)


async def read_page(ctx: ToolContext, path: Path, line: int, limit: int) -> str:
    """Lines `line`.. of the file, at most `limit`, for reading (not for writing back)."""
    if not ctx.editor.can_read_files:
        return await LocalEditor().read_text_file(str(path), line, limit)
    text = await ctx.editor.read_text_file(str(path), line, limit)
    if not text and await missing_locally(ctx, path):
        raise ToolFailed(f"{path}: the file does not exist")
    return text
