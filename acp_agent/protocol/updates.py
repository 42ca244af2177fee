"""Turn events -> `session/update` payloads, built with the schema models and dumped strictly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import (
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    MessageChunk,
    Notice,
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from . import schema as s


def session_update(
    event: TurnEvent,
    terminal_meta: bool = False,
    *,
    compaction: bool = False,
    notices: bool = False,
) -> dict[str, Any] | None:
    """The update payload, or None when there is nothing this client would show.

    `terminal_meta`: the client renders Zed's `_meta.terminal_*` extension, which streams a
    local command's output into a display terminal. `compaction`: the client advertised
    `session.compaction`; other clients see a finished compaction as an agent message.
    `notices`: the client advertised `session.notices`; other clients see a notice as a
    line of its own (see `_notice_line`).
    """
    if isinstance(event, Notice) and not notices:
        return _notice_line(event)
    if not compaction and isinstance(
        event, CompactionStarted | CompactionSummaryChunk | CompactionFinished
    ):
        return _compaction_message(event)
    if isinstance(event, ToolCallUpdated) and event.terminal is not None:
        if terminal_meta:
            return _with_terminal_meta(event, event.terminal)
        if _only_terminal(event):
            return None
    return dump(_update_model(event))


def _compaction_message(
    event: CompactionStarted | CompactionSummaryChunk | CompactionFinished,
) -> dict[str, Any] | None:
    """A finished compaction as a short agent message, for clients without
    `session.compaction` (its progress and summary are not shown to them)."""
    if not isinstance(event, CompactionFinished):
        return None
    match event.status:
        case "completed":
            used = "" if event.share is None else f"{event.share:.0%} of the context window used; "
            count = event.summarised
            plural = "" if count == 1 else "s"
            text = f"[Context compacted: {used}{count} earlier message{plural} summarised.]"
        case "failed":
            text = f"[Context compaction failed: {event.error}]"
        case _:
            return None
    return dump(
        s.AgentMessageChunk(
            session_update="agent_message_chunk",
            content=_text_block(text + "\n\n"),
            message_id=event.compaction_id,
        )
    )


def _notice_line(notice: Notice) -> dict[str, Any]:
    """A notice for clients without `session.notices`: `[title; description]` and a blank
    line, so consecutive notices never share a line (also where text is read as Markdown),
    in the thoughts, or in the agent message it belongs to."""
    title = _notice_title(notice)
    line = f"{title.rstrip('.')}; {notice.description}" if notice.description else title
    block = _text_block(f"[{line}]\n\n")
    if notice.message_id is not None:
        return dump(
            s.AgentMessageChunk(
                session_update="agent_message_chunk", content=block, message_id=notice.message_id
            )
        )
    return dump(s.AgentThoughtChunk(session_update="agent_thought_chunk", content=block))


def _notice_title(notice: Notice) -> str:
    """The spec's title: non-empty plain text on one line."""
    return " ".join(notice.title.split()) or "Notice"


def _with_terminal_meta(event: ToolCallUpdated, stream: TerminalStream) -> dict[str, Any]:
    if stream.cwd is not None:
        # Zed opens a display terminal only from a `tool_call`; repeating one for a known id
        # updates that call.
        update = dump(
            s.ToolCallStart(
                session_update="tool_call",
                tool_call_id=event.id,
                title=event.title or "",
                kind="execute",
                status=event.status,
                content=None
                if event.content is None
                else [_tool_content(c) for c in event.content],
            )
        )
    else:
        update = dump(_update_model(event))
    update["_meta"] = _terminal_meta(stream)
    return update


def _only_terminal(event: ToolCallUpdated) -> bool:
    return (
        event.status is None
        and event.title is None
        and event.content is None
        and event.locations is None
        and event.raw_output is None
    )


def _terminal_meta(stream: TerminalStream) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if stream.cwd is not None:
        meta["terminal_info"] = {"terminal_id": stream.terminal_id, "cwd": stream.cwd}
    if stream.output:
        meta["terminal_output"] = {"terminal_id": stream.terminal_id, "data": stream.output}
    if stream.exited:
        meta["terminal_exit"] = {
            "terminal_id": stream.terminal_id,
            "exit_code": stream.exit_code,
            "signal": stream.signal,
        }
    return meta


def dump(model: s.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _update_model(event: TurnEvent) -> s.BaseModel:
    match event:
        case MessageChunk(text=text, message_id=message_id):
            return s.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=_text_block(text),
                message_id=message_id,
            )
        case ThoughtChunk(text=text, message_id=message_id):
            return s.AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=_text_block(text),
                message_id=message_id,
            )
        case UserMessageChunk(part=part, message_id=message_id):
            return s.UserMessageChunk(
                session_update="user_message_chunk",
                content=_prompt_block(part),
                message_id=message_id,
            )
        case CommandsChanged(commands=commands):
            return s.AvailableCommandsUpdate(
                session_update="available_commands_update",
                available_commands=[
                    s.AvailableCommand(
                        name=command.name,
                        description=command.description,
                        input=None
                        if command.hint is None
                        else s.AvailableCommandInput(
                            root=s.UnstructuredCommandInput(hint=command.hint)
                        ),
                    )
                    for command in commands
                ],
            )
        case SessionInfoChanged(title=title, updated_at=updated_at):
            return s.SessionInfoUpdate(
                session_update="session_info_update", title=title, updated_at=updated_at
            )
        case ToolCallStarted():
            return s.ToolCallStart(
                session_update="tool_call",
                tool_call_id=event.id,
                title=event.title,
                kind=event.kind,
                status=event.status,
                raw_input=event.raw_input,
                locations=[_location(loc) for loc in event.locations] or None,
                content=[_tool_content(c) for c in event.content] or None,
                name=event.name,
            )
        case ToolCallUpdated():
            return s.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=event.id,
                status=event.status,
                title=event.title,
                raw_output=event.raw_output,
                locations=None
                if event.locations is None
                else [_location(loc) for loc in event.locations],
                content=None
                if event.content is None
                else [_tool_content(c) for c in event.content],
            )
        case PlanUpdated(entries=entries):
            return s.AgentPlanUpdate(
                session_update="plan",
                entries=[
                    s.PlanEntry(content=e.content, priority=e.priority, status=e.status)
                    for e in entries
                ],
            )
        case CompactionStarted(compaction_id=compaction_id):
            return s.CompactionUpdate(
                session_update="compaction_update",
                compaction_id=compaction_id,
                status="in_progress",
            )
        case CompactionSummaryChunk(compaction_id=compaction_id, text=text):
            return s.CompactionSummaryChunk(
                session_update="compaction_summary_chunk",
                compaction_id=compaction_id,
                content=_text_block(text),
            )
        case CompactionFinished(compaction_id=compaction_id, summary=summary):
            return s.CompactionUpdate(
                session_update="compaction_update",
                compaction_id=compaction_id,
                status=event.status,
                summary=None if summary is None else [_text_block(summary)],
                error=event.error,
            )
        case Notice(description=description, severity=severity):
            return s.NoticeUpdate(
                session_update="notice",
                severity=severity,
                title=_notice_title(event),
                description=description,
            )
        case UsageUpdated():
            cost = None
            if event.cost_usd is not None:
                cost = s.Cost(amount=round(event.cost_usd, 6), currency="USD")
            return s.UsageUpdate(
                session_update="usage_update", used=event.used, size=event.size, cost=cost
            )


def _prompt_block(
    part: TextPart | ImagePart | ResourceLinkPart | DocumentPart,
) -> (
    s.TextContentBlock
    | s.ImageContentBlock
    | s.ResourceContentBlock
    | s.EmbeddedResourceContentBlock
):
    """A part of a user's prompt as the client sent it (a mention: its link)."""
    match part:
        case TextPart(text=text):
            return _text_block(text)
        case ImagePart(data=data, mime_type=mime_type):
            return s.ImageContentBlock(type="image", data=data, mime_type=mime_type)
        case ResourceLinkPart(uri=uri, name=name, mime_type=mime_type):
            return s.ResourceContentBlock(
                type="resource_link", uri=uri, name=name, mime_type=mime_type
            )
        case DocumentPart(data=data, mime_type=mime_type, name=name):
            return s.EmbeddedResourceContentBlock(
                type="resource",
                resource=s.BlobResourceContents(uri=name, blob=data, mime_type=mime_type),
            )


def _text_block(text: str) -> s.TextContentBlock:
    return s.TextContentBlock(type="text", text=text)


def _location(location: Location) -> s.ToolCallLocation:
    return s.ToolCallLocation(path=location.path, line=location.line)


ToolCallContent = s.ContentToolCallContent | s.FileEditToolCallContent | s.TerminalToolCallContent


def _tool_content(content: ToolContent) -> ToolCallContent:
    match content:
        case TextPart(text=text):
            return s.ContentToolCallContent(type="content", content=_text_block(text))
        case DiffContent():
            return s.FileEditToolCallContent(
                type="diff", path=content.path, old_text=content.old_text, new_text=content.new_text
            )
        case TerminalContent(terminal_id=terminal_id):
            return s.TerminalToolCallContent(type="terminal", terminal_id=terminal_id)


def tool_call_content(content: Sequence[ToolContent]) -> list[ToolCallContent] | None:
    """Tool content as the wire has it (a permission request's tool call too); None: none."""
    return [_tool_content(c) for c in content] or None


def tool_call_locations(locations: Sequence[Location]) -> list[s.ToolCallLocation] | None:
    return [_location(loc) for loc in locations] or None
