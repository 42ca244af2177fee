"""Mentions in a prompt (`@file` in the editor: `resource_link` blocks), read before the
turn so the model gets what they point at.

A `file://` link is read as `tools.file_context` reads it: through the editor when it
offers files (unsaved buffers included), else from the disk, with its path and line range
(`#L10-25`, `#L10:25`, `#L10`), a directory as a listing, images and PDFs as such, large
files cut with a note. A path outside the session roots passes the permission policy as a
`read_file` call would, in the session's mode, with its remembered answers: when it asks,
the user sees a read tool call and is asked about it; a refusal leaves a note for the model,
and the prompt goes on. A missing file is a note too. Links of other schemes stay links.
A mention whose text the editor embedded (Zed's @file, a selection) is given from that text,
with the same path, range and size limit, and nothing is asked.

Reading happens in the turn's queue slot (a cancel stops it, and the prompt then never
joins the history); the user's message keeps each mention as the link they typed, with what
was read beside it (`ResourceLinkPart.context`), so a loaded session shows the link.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

import anyio

from ..messages import (
    Location,
    Message,
    Part,
    ResourceLinkPart,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
)
from ..tools import Decision, PermissionMemory, PermissionMode, PermissionQuestion, ToolContext
from ..tools.file_context import LineRange, MentionedContent, given_text_context, read_context
from ..tools.permissions import decide
from ..tools.read_file import ReadFile, ReadFileParams

log = logging.getLogger(__name__)

CLEANUP_SECONDS = 0.5
"""Time allowed to show a mention's read as failed after the turn was cancelled."""
_LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})
_LINES = re.compile(r"L?(\d+)(?:C\d+)?(?:[-:]L?(\d+)(?:C\d+)?)?", re.IGNORECASE)


class MentionsCancelled(Exception):
    """The user answered a mention's permission request `cancelled`: the turn ends."""


class NotLocal(ValueError):
    """A `file://` URI naming a file on another host."""


@dataclass(frozen=True, slots=True)
class FileTarget:
    path: str
    """Percent-decoded; relative paths are taken from the session cwd."""
    lines: LineRange | None = None


def parse_file_uri(uri: str) -> FileTarget | None:
    """The file a `file:` URI names, with the line range of its fragment; None for any
    other scheme. `NotLocal` for a file on another host."""
    parts = urlsplit(uri.strip())
    if parts.scheme.lower() != "file":
        return None
    host = (parts.hostname or "").lower()
    if host not in _LOCAL_HOSTS:
        raise NotLocal(f"{uri} names a file on the host {parts.hostname}, not this machine")
    path = unquote(parts.path, errors="surrogateescape") or "/"
    return FileTarget(path, parse_lines(unquote(parts.fragment)))


def parse_lines(fragment: str) -> LineRange | None:
    """`L10-25`, `L10:25`, `L10-L25`, `L10` (columns, as in `L10C4`, are ignored); None for
    any other fragment."""
    match = _LINES.fullmatch(fragment.strip())
    if match is None:
        return None
    first = max(1, int(match[1]))
    last = max(1, int(match[2])) if match[2] else first
    first, last = min(first, last), max(first, last)
    return LineRange(first, last)


class MentionHost(Protocol):
    """Where the reads the user is asked about are shown (the turn's host)."""

    async def emit(self, event: TurnEvent) -> None: ...

    async def ask_permission(self, question: PermissionQuestion) -> Decision: ...


@dataclass
class MentionReader:
    context: ToolContext
    host: MentionHost
    mode: PermissionMode
    memory: PermissionMemory
    """The session's remembered answers: an "always" answer here holds for `read_file`."""
    max_bytes: int

    async def read(self, message: Message) -> Message:
        """`message` with every mention not read yet given what it points at."""
        if not any(isinstance(part, ResourceLinkPart) for part in message.parts):
            return message
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, ResourceLinkPart) and part.context is None:
                context = await self._context(part)
                if context is not None:
                    part = replace(part, context=context, embedded_text=None)
            parts.append(part)
        return Message(message.role, parts)

    async def _context(self, link: ResourceLinkPart) -> MentionedContent | None:
        if link.embedded_text is not None:
            return (TextPart(self._given(link, link.embedded_text)),)
        try:
            target = parse_file_uri(link.uri)
        except NotLocal as exc:
            return (TextPart(f"[{link.link} was not read: {exc}]"),)
        if target is None:
            return None  # another scheme: the model has the link
        path = self.context.resolve(target.path)
        call_id: str | None = None
        if not self.context.inside_roots(path):
            refusal, call_id = await self._permit(path, target.lines)
            if refusal is not None:
                return (TextPart(f"[the mentioned file {path} was not read: {refusal}]"),)
        try:
            context = await read_context(
                self.context, path, target.lines, mime_type=link.mime_type, max_bytes=self.max_bytes
            )
        except anyio.get_cancelled_exc_class():
            if call_id is not None:
                with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                    await self._end(call_id, "Cancelled.")
            raise
        if call_id is not None:
            await self.host.emit(ToolCallUpdated(call_id, status="completed"))
        log.info("mention %s read (%d parts)", path, len(context))
        return context

    def _given(self, link: ResourceLinkPart, text: str) -> str:
        """The text the editor sent with the mention, as a read would give it. Nothing is
        read or asked: the user picked it in the editor, which sent it."""
        try:
            target = parse_file_uri(link.uri)
        except NotLocal:
            target = None
        if target is None:
            return given_text_context(link.uri, text, None, self.max_bytes)
        source = str(self.context.resolve(target.path))
        return given_text_context(source, text, target.lines, self.max_bytes)

    async def _permit(self, path: Path, lines: LineRange | None) -> tuple[str | None, str | None]:
        """Why the policy does not let a mention outside the roots be read (None: it does),
        asking the user when it says so; and the id of the tool call shown while asking."""
        tool, params = ReadFile(), ReadFileParams(path=str(path))
        verdict = decide(tool, params, self.context, self.mode, self.memory)
        if verdict == "allow":
            return None, None
        if verdict == "reject":
            return "the user chose to always reject reading there", None
        call_id = f"mention_{uuid.uuid4().hex}"
        title = f"Read {path} (mentioned)"
        raw_input = {"path": str(path)}
        if lines is not None:
            raw_input["lines"] = f"{lines.first}-{lines.last}"
        await self.host.emit(
            ToolCallStarted(
                call_id,
                title,
                "read",
                raw_input=dict(raw_input),
                locations=(Location(str(path), lines.first if lines else None),),
                name=tool.name,
            )
        )
        question = PermissionQuestion(
            call_id,
            title,
            "read",
            dict(raw_input),
            always_scope=self.memory.describe(tool, params, self.context),
            name=tool.name,
            locations=(Location(str(path), lines.first if lines else None),),
        )
        try:
            decision = await self.host.ask_permission(question)
        except anyio.get_cancelled_exc_class():
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await self._end(call_id, "Cancelled.")
            raise
        if decision == "cancelled":
            await self._end(call_id, "Cancelled.")
            raise MentionsCancelled
        self.memory.remember(decision, tool, params, self.context)
        if decision in ("reject_once", "reject_always"):
            await self._end(call_id, "The user did not allow reading this file.")
            return "the user did not allow reading it (it is outside the workspace)", None
        return None, call_id

    async def _end(self, call_id: str, why: str) -> None:
        await self.host.emit(ToolCallUpdated(call_id, status="failed", content=(TextPart(why),)))


__all__ = [
    "FileTarget",
    "MentionHost",
    "MentionReader",
    "MentionsCancelled",
    "NotLocal",
    "parse_file_uri",
    "parse_lines",
]
