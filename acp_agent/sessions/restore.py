"""A stored session brought back: its state from the log's records, and what the user saw,
to show again on `session/load`.

The log keeps the full history; the working context the model is sent starts at the last
compaction's summary. The "always" answers come back with the roots they were given in
(the last roots record before them), and `permissions_in` keeps the "always allow" ones
only for a session opened in those roots. A log that recorded answers before it recorded
roots (older versions) has them dropped: the safe choice, they may have been given in
other roots. Terminal output is shown again as text: the terminals the live
session showed are gone with the process that ran them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..messages import (
    DocumentPart,
    EditorPrompt,
    ImagePart,
    Message,
    ResourceLinkPart,
    SessionInfoChanged,
    TerminalContent,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolResultPart,
    TurnEvent,
    UserMessageChunk,
)
from ..tools.permissions import PermissionMemory
from .outcomes import replayed_end
from .records import (
    ChoiceRecord,
    CompactionRecord,
    EditorPromptRecord,
    EventRecord,
    MessageRecord,
    PermissionsRecord,
    Record,
    RootsRecord,
    SessionHeader,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
)

log = logging.getLogger(__name__)


@dataclass
class StoredSession:
    header: SessionHeader
    history: list[Message] = field(default_factory=list)
    """The working context: the last compaction's summary (if any), then what followed."""
    summarised: int = 0
    """How many messages of the full history that summary replaces (`Session.summarised`)."""
    model: str | None = None
    mode: str | None = None
    thought_level: str | None = None
    speed: str | None = None
    permissions: PermissionMemory = field(default_factory=PermissionMemory)
    permission_roots: tuple[str, ...] | None = None
    """The roots (cwd first) `permissions` were given in; None: not recorded."""
    roots: tuple[str, ...] | None = None
    """The roots the session last worked in (cwd first), from the last roots record; None
    in a log that recorded none."""
    usage: UsageRecord | None = None
    title: str | None = None
    title_chosen: bool = False
    """The title is the user's (`session/set_title`)."""
    editor_prompt: EditorPrompt | None = None


def restore(records: Sequence[Record]) -> StoredSession:
    """The session's state after the last record. `records` starts with the header."""
    header = records[0]
    assert isinstance(header, SessionHeader)
    stored = StoredSession(header)
    messages: list[Message] = []
    compaction: CompactionRecord | None = None
    roots: tuple[str, ...] | None = None
    for record in records[1:]:
        match record:
            case RootsRecord(cwd=cwd, additional_roots=additional):
                roots = (cwd, *additional)
            case MessageRecord(message=message):
                messages.append(message)
            case ChoiceRecord():
                stored.model = record.model or stored.model
                stored.mode = record.mode or stored.mode
                stored.thought_level = record.thought_level or stored.thought_level
                stored.speed = record.speed or stored.speed
            case PermissionsRecord(allowed=allowed, rejected=rejected):
                stored.permissions = PermissionMemory(set(allowed), set(rejected))
                stored.permission_roots = roots
            case UsageRecord():
                stored.usage = record
            case TitleRecord(title=title, chosen=chosen):
                stored.title, stored.title_chosen = title, chosen is True
            case EditorPromptRecord(mode=mode, text=text):
                stored.editor_prompt = EditorPrompt(mode, text)
            case CompactionRecord():
                compaction = record
    stored.roots = roots
    if compaction is None:
        stored.history = messages
    else:
        stored.history = [compaction.summary, *messages[compaction.replaced :]]
        stored.summarised = compaction.replaced
    return stored


def same_roots(a: Sequence[str], b: Sequence[str]) -> bool:
    """The same cwd (first) and the same additional directories, in any order."""
    return a[:1] == b[:1] and set(a[1:]) == set(b[1:])


def permissions_in(
    stored: StoredSession, roots: Sequence[str], session_id: str
) -> PermissionMemory:
    """The stored answers for a session opened in `roots`: "always allow" only if they are
    the roots it was given in (trust in one project is not trust in another); "always
    reject" stands everywhere (it can only make the agent ask less of the user's trust)."""
    given_in = stored.permission_roots
    if given_in is not None and same_roots(given_in, roots):
        return stored.permissions
    if stored.permissions.allowed:
        where = "before roots were recorded" if given_in is None else f"in {list(given_in)}"
        log.info(
            "session %s: its always-allow answers were given %s, not in %s: it starts without them",
            session_id,
            where,
            list(roots),
        )
    return PermissionMemory(set(), set(stored.permissions.rejected))


def replay(records: Sequence[Record]) -> list[TurnEvent]:
    """What the user saw, in order: their prompts, the replies, thoughts, tool calls with
    their final state, plans, a line for each turn that failed or was cancelled; then the
    title."""
    outputs = _tool_outputs(records)
    events: list[TurnEvent] = []
    title: str | None = None
    for record in records:
        match record:
            case MessageRecord(message=Message(role="user") as message, message_id=message_id):
                events.extend(
                    UserMessageChunk(part, message_id)
                    for part in message.parts
                    # A mention as the user typed it: the link, not what was read for it.
                    if isinstance(part, (TextPart, ImagePart, ResourceLinkPart, DocumentPart))
                )
            case EventRecord(event=event):
                if (shown := _without_terminals(event, outputs)) is not None:
                    events.append(shown)
            case TitleRecord(title=stored_title):
                title = stored_title
            case TurnEndRecord():
                # A failed or cancelled turn shows what happened, not just the prompt.
                if (end := replayed_end(record)) is not None:
                    events.append(end)
    if title is not None:
        events.append(SessionInfoChanged(title=title))
    return events


def _tool_outputs(records: Sequence[Record]) -> dict[str, str]:
    """What each tool call returned to the model, by call id."""
    outputs: dict[str, str] = {}
    for record in records:
        if isinstance(record, MessageRecord) and record.message.role == "tool":
            for part in record.message.parts:
                if isinstance(part, ToolResultPart):
                    outputs[part.tool_call_id] = part.text
    return outputs


def _without_terminals(event: TurnEvent, outputs: dict[str, str]) -> TurnEvent | None:
    if isinstance(event, ToolCallUpdated) and event.terminal is not None:
        # A command's live output stream (older logs kept it): its terminal is gone, and a
        # client would open a display terminal for it again. Keep the rest, if any.
        event = replace(event, terminal=None)
        if event == ToolCallUpdated(event.id):
            return None
    match event:
        case ToolCallStarted(content=content) if _has_terminal(content):
            return replace(event, content=_as_text(content, outputs.get(event.id, "")))
        case ToolCallUpdated(content=content) if content and _has_terminal(content):
            return replace(event, content=_as_text(content, outputs.get(event.id, "")))
        case _:
            return event


def _has_terminal(content: Sequence[ToolContent]) -> bool:
    return any(isinstance(item, TerminalContent) for item in content)


def _as_text(content: Sequence[ToolContent], output: str) -> tuple[ToolContent, ...]:
    shown = f"```\n{output.rstrip()}\n```" if output.strip() else "(output not kept)"
    return tuple(TextPart(shown) if isinstance(item, TerminalContent) else item for item in content)
